// SPDX-License-Identifier: Apache-2.0
//
// ort_rows.mjs: times ONNX Runtime (npm's onnxruntime-node, CPU execution
// provider) on the models bench/compare/make_onnx.py wrote for bench_attention's rows.
//
//   node bench/compare/ort_rows.mjs --modules DIR/node_modules --manifest DIR/manifest.json --out OUT.json
//        [--repetitions 5] [--min-time 0.3] [--threads 1,2] [--seed 1]
//
// --modules is where `npm install onnxruntime-node` put the package (bench.sh
// --compare installs it under $BUILD_DIR/compare, outside the repository).
// One session per (model, thread count): intraOpNumThreads n, interOpNumThreads 1,
// sequential execution, all graph optimizations. Every model's output is
// checked once against make_onnx.py's float64 reference (three query rows,
// max|err| / max|ref| <= 1e-4), else the model is reported as an error.
// Timing as torch_rows.py: all (model, threads) repetitions in one seeded
// random order; a repetition is one untimed session.run, then runs until
// --min-time seconds have passed, mean time per run; median over repetitions.
// A row with several candidate models (make_onnx.py --paths all) reports the
// fastest one at each thread count, naming it ("path"), with the others'
// medians in "other_paths". Times include Node's session.run overhead (the
// async call and the output tensor's allocation), which dominates T1.
// Output: Google-Benchmark-like JSON, BM_Compare/onnxruntime/<id>/threads:<n>.

import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';

const TOLERANCE = 1e-4;

function parseArgs(argv) {
  const args = { repetitions: 5, minTime: 0.3, threads: [1, 2], seed: 1 };
  for (let i = 0; i < argv.length; i += 2) {
    const [key, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`ort_rows.mjs: ${key} needs a value`);
    if (key === '--modules') args.modules = value;
    else if (key === '--manifest') args.manifest = value;
    else if (key === '--out') args.out = value;
    else if (key === '--repetitions') args.repetitions = parseInt(value, 10);
    else if (key === '--min-time') args.minTime = parseFloat(value);
    else if (key === '--threads') args.threads = value.split(',').map((t) => parseInt(t, 10));
    else if (key === '--seed') args.seed = parseInt(value, 10);
    else throw new Error(`ort_rows.mjs: unknown argument ${key}`);
  }
  for (const need of ['modules', 'manifest', 'out']) {
    if (!args[need]) throw new Error(`ort_rows.mjs: --${need} is required`);
  }
  if (!(args.repetitions >= 1) || !(args.minTime >= 0) || args.threads.some((t) => !(t >= 1))) {
    throw new Error('ort_rows.mjs: --repetitions, --min-time and --threads must be positive');
  }
  return args;
}

// A small seeded generator (mulberry32) for the interleaving order.
function shuffled(items, seed) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = items.slice();
  for (let i = out.length - 1; i > 0; --i) {
    const j = Math.floor(next() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

function median(values) {
  const s = values.slice().sort((a, b) => a - b);
  const h = s.length >> 1;
  return s.length % 2 ? s[h] : 0.5 * (s[h - 1] + s[h]);
}

// The output row (b, i) of a model's output, flattened as make_onnx.py's reference.
function outputRow(row, layout, data, b, i) {
  const hd = row.Hq * row.D;
  if (layout === 'BNSH') {  // [B, Hq, Lq, D]
    const out = new Float64Array(hd);
    for (let h = 0; h < row.Hq; ++h) {
      const base = ((b * row.Hq + h) * row.Lq + i) * row.D;
      for (let d = 0; d < row.D; ++d) out[h * row.D + d] = data[base + d];
    }
    return out;
  }
  const width = layout === 'BSE' ? row.d_model : hd;  // [B, Lq, width]
  return Float64Array.from(data.subarray((b * row.Lq + i) * width, (b * row.Lq + i + 1) * width));
}

function checkError(row, model, data) {
  let err = 0;
  let scale = 0;
  for (const c of row.check) {
    const got = outputRow(row, model.output_layout, data, c.b, c.i);
    c.expected.forEach((e, k) => {
      err = Math.max(err, Math.abs(got[k] - e));
      scale = Math.max(scale, Math.abs(e));
    });
  }
  return scale > 0 ? err / scale : err;
}

async function timeRepetition(session, feeds, minTime) {
  await session.run(feeds);  // untimed
  let calls = 0;
  const start = process.hrtime.bigint();
  for (;;) {
    await session.run(feeds);
    ++calls;
    const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
    if (elapsed >= minTime) return elapsed / calls;
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const require = createRequire(join(resolve(args.modules), 'noop.js'));
  const ort = require('onnxruntime-node');
  const ortVersion = require('onnxruntime-node/package.json').version;
  const manifest = JSON.parse(readFileSync(args.manifest, 'utf8'));
  const dir = dirname(resolve(args.manifest));

  const tensors = new Map();  // file -> ort.Tensor (inputs shared by a row's models)
  const feedsOf = (model) => {
    const feeds = {};
    for (const f of model.feeds) {
      if (!tensors.has(f.file)) {
        const bytes = readFileSync(join(dir, f.file));
        const data = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
        tensors.set(f.file, new ort.Tensor('float32', data, f.dims));
      }
      feeds[f.name] = tensors.get(f.file);
    }
    return feeds;
  };

  const jobs = [];  // {row, model, threads, session, feeds}
  const errors = new Map();  // `${row.id}/${model.path}` -> message
  for (const row of manifest.rows) {
    for (const model of row.models) {
      const key = `${row.id}/${model.path}`;
      const feeds = feedsOf(model);
      for (const threads of args.threads) {
        let session;
        try {
          session = await ort.InferenceSession.create(join(dir, model.file), {
            executionProviders: ['cpu'],
            intraOpNumThreads: threads,
            interOpNumThreads: 1,
            executionMode: 'sequential',
            graphOptimizationLevel: 'all',
          });
          if (model.check_rel_err === undefined) {  // checked once, on its first session
            const out = await session.run(feeds);
            model.check_rel_err = checkError(row, model, out[session.outputNames[0]].data);
            if (!(model.check_rel_err <= TOLERANCE)) {
              errors.set(key, `output differs from the float64 reference: max|err|/max|ref| ${model.check_rel_err}`);
            }
          }
        } catch (e) {
          errors.set(key, `${e.message}`.split('\n')[0]);
        }
        if (errors.has(key)) break;
        jobs.push({ row, model, threads, session, feeds, times: [] });
      }
      const status = errors.has(key) ? `error: ${errors.get(key)}` : `checked: ${model.check_rel_err.toExponential(2)}`;
      console.error(`ort_rows.mjs: ${row.id}: ${model.what} (${status})`);
    }
  }

  const live = jobs.filter((j) => !errors.has(`${j.row.id}/${j.model.path}`));
  const order = shuffled(Array.from({ length: args.repetitions }, () => live).flat(), args.seed);
  for (const job of order) job.times.push(await timeRepetition(job.session, job.feeds, args.minTime));

  const benchmarks = [];
  for (const row of manifest.rows) {
    for (const threads of args.threads) {
      const name = `BM_Compare/onnxruntime/${row.id}/threads:${threads}`;
      const timed = live.filter((j) => j.row.id === row.id && j.threads === threads)
        .map((j) => ({ job: j, median: median(j.times) }))
        .sort((a, b) => a.median - b.median);
      if (timed.length === 0) {
        const message = row.models.map((m) => `${m.path}: ${errors.get(`${row.id}/${m.path}`)}`).join('; ');
        benchmarks.push({ name, run_name: name, run_type: 'iteration', label: row.label, error_occurred: true,
                          error_message: message });
        continue;
      }
      const best = timed[0];
      const scale = row.time_unit === 'ns' ? 1e9 : 1e3;
      const entry = {
        name: `${name}_median`, run_name: name, run_type: 'aggregate', aggregate_name: 'median',
        repetitions: best.job.times.length, threads: 1, real_time: best.median * scale, time_unit: row.time_unit,
        label: row.label, GFLOPS: row.flops / best.median / 1e9,
        min_time_per_call: Math.min(...best.job.times) * scale, max_time_per_call: Math.max(...best.job.times) * scale,
        path: best.job.model.what, check_rel_err: best.job.model.check_rel_err,
      };
      if (row.decode) entry.GBps = row.kv_bytes / best.median / 1e9;
      if (timed.length > 1 || errors.size) {
        entry.other_paths = Object.fromEntries(row.models.filter((m) => m !== best.job.model).map((m) => {
          const t = timed.find((x) => x.job.model === m);
          return [m.path, t ? `${(t.median * scale).toPrecision(4)} ${row.time_unit}`
                            : `error: ${errors.get(`${row.id}/${m.path}`)}`];
        }));
      }
      benchmarks.push(entry);
    }
  }
  const context = {
    library: 'onnxruntime',
    hwyattn_run_date: manifest.hwyattn_run_date,  // report.py pairs the results with that hwyattn run
    skipped_rows: manifest.skipped_rows || {},
    library_version: ortVersion,
    node_version: process.version,
    onnx_version: manifest.onnx_version,
    repetitions: String(args.repetitions),
    min_time: String(args.minTime),
    random_interleaving: 'true',
  };
  writeFileSync(args.out, `${JSON.stringify({ context, benchmarks }, null, 2)}\n`);
}

main().catch((e) => {
  console.error(e.stack || `${e}`);
  process.exit(1);
});
