/* SPDX-License-Identifier: Apache-2.0
 *
 * thread_pool.c: run hwyattn on your own threads (opts->parallel).
 *
 * An inference engine already owns a thread pool; a library that starts a
 * second set of threads (an OpenMP team) oversubscribes the cores. This
 * example is the whole pattern an embedder copies:
 *
 *   1. a pool: a few pthreads waiting on a condition variable (pool_*);
 *   2. its parallel_for in the shape hwyattn asks for: run task(ctx, i) for
 *      every i in [0, n) and return when all have finished (pool_parallel_for;
 *      the calling thread helps, so num_workers = threads + 1);
 *   3. an hwyattn_parallel that points at both, passed as opts->parallel to
 *      hwyattn_sdpa and hwyattn_mha_forward.
 *
 * It checks that the results are bit-identical to the library's own threads
 * and that the pool really ran the work, and exits non-zero otherwise.
 * Plain C99 + pthreads: cc thread_pool.c -lhwyattn -lpthread -lm
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hwyattn.h"

/* ---- 1. The pool ------------------------------------------------------- */

typedef struct pool {
  pthread_mutex_t mu;
  pthread_cond_t work; /* a job was posted (or stop) */
  pthread_cond_t done; /* the job's last task finished */
  pthread_t* threads;
  int num_threads;
  int stop;
  /* The current job: task(ctx, i) for i in [0, n). Tasks are claimed one
   * by one under the mutex (next), so a thread never runs a task of a job
   * that has already returned. */
  int64_t n, next, finished;
  hwyattn_task_fn task;
  void* ctx;
  /* Statistics for this example. */
  long jobs, tasks;
} pool;

/* Claims and runs tasks of the current job until none is left. Called
 * with the mutex held; returns with it held. */
static void pool_work(pool* p) {
  while (p->next < p->n) {
    const int64_t i = p->next++;
    hwyattn_task_fn task = p->task;
    void* ctx = p->ctx;
    pthread_mutex_unlock(&p->mu);
    task(ctx, i);
    pthread_mutex_lock(&p->mu);
    if (++p->finished == p->n) pthread_cond_broadcast(&p->done);
  }
}

static void* pool_thread(void* arg) {
  pool* p = (pool*)arg;
  pthread_mutex_lock(&p->mu);
  while (!p->stop) {
    if (p->next < p->n) {
      pool_work(p);
    } else {
      pthread_cond_wait(&p->work, &p->mu);
    }
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static int pool_start(pool* p, int num_threads) {
  int t;
  memset(p, 0, sizeof(*p));
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work, NULL);
  pthread_cond_init(&p->done, NULL);
  p->threads = (pthread_t*)malloc((size_t)num_threads * sizeof(pthread_t));
  if (p->threads == NULL) return 0;
  for (t = 0; t < num_threads; ++t) {
    if (pthread_create(&p->threads[t], NULL, pool_thread, p) != 0) break;
    p->num_threads = t + 1;
  }
  return p->num_threads == num_threads;
}

static void pool_stop(pool* p) {
  int t;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);
  for (t = 0; t < p->num_threads; ++t) pthread_join(p->threads[t], NULL);
  free(p->threads);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->work);
  pthread_mutex_destroy(&p->mu);
}

/* ---- 2. parallel_for as hwyattn_parallel wants it ------------------------ */

static void pool_parallel_for(void* pool_ptr, int64_t n, hwyattn_task_fn task, void* ctx) {
  pool* p = (pool*)pool_ptr;
  pthread_mutex_lock(&p->mu);
  p->task = task;
  p->ctx = ctx;
  p->n = n;
  p->next = 0;
  p->finished = 0;
  p->jobs += 1;
  p->tasks += (long)n;
  pthread_cond_broadcast(&p->work);
  pool_work(p); /* the calling thread is a worker too */
  while (p->finished < p->n) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
}

/* ---- 3. Using it ----------------------------------------------------------- */

static void fill(float* x, size_t n, unsigned seed) {
  size_t i;
  for (i = 0; i < n; ++i) {
    seed = seed * 1103515245u + 12345u;
    x[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
  }
}

static int failed(hwyattn_status s, const char* what) {
  if (s == HWYATTN_OK) return 0;
  fprintf(stderr, "%s: %s: %s\n", what, hwyattn_status_string(s), hwyattn_last_error());
  return 1;
}

int main(void) {
  /* Decode: 32 query heads over 8 kv heads of a 4096-token cache. */
  enum { B = 1, HQ = 32, HKV = 8, LQ = 1, LK = 4096, D = 128, E = 256, L = 128 };
  const int64_t q_shape[4] = {B, HQ, LQ, D}, kv_shape[4] = {B, HKV, LK, D};
  const int64_t x_shape[3] = {2, L, E};
  float *q, *k, *v, *out_pool, *out_own, *w, *x, *y_pool, *y_own;
  hwyattn_tensor tq, tk, tv, to_pool, to_own, tx, ty_pool, ty_own;
  hwyattn_sdpa_options opts;
  hwyattn_parallel par;
  hwyattn_mha_config cfg;
  hwyattn_mha_weights mw;
  hwyattn_mha* layer = NULL;
  pool p;
  int bad = 0;
  size_t i;

  q = (float*)malloc(sizeof(float) * B * HQ * LQ * D);
  k = (float*)malloc(sizeof(float) * B * HKV * LK * D);
  v = (float*)malloc(sizeof(float) * B * HKV * LK * D);
  out_pool = (float*)malloc(sizeof(float) * B * HQ * LQ * D);
  out_own = (float*)malloc(sizeof(float) * B * HQ * LQ * D);
  w = (float*)malloc(sizeof(float) * 4 * E * E);
  x = (float*)malloc(sizeof(float) * 2 * L * E);
  y_pool = (float*)malloc(sizeof(float) * 2 * L * E);
  y_own = (float*)malloc(sizeof(float) * 2 * L * E);
  if (!q || !k || !v || !out_pool || !out_own || !w || !x || !y_pool || !y_own) return 1;
  fill(q, (size_t)B * HQ * LQ * D, 1);
  fill(k, (size_t)B * HKV * LK * D, 2);
  fill(v, (size_t)B * HKV * LK * D, 3);
  fill(w, (size_t)4 * E * E, 4);
  for (i = 0; i < 4 * E * E; ++i) w[i] *= 0.0625f; /* ~ nn.Linear's 1/sqrt(E) */
  fill(x, (size_t)2 * L * E, 5);
  hwyattn_tensor_contiguous(&tq, q, HWYATTN_F32, 4, q_shape);
  hwyattn_tensor_contiguous(&tk, k, HWYATTN_F32, 4, kv_shape);
  hwyattn_tensor_contiguous(&tv, v, HWYATTN_F32, 4, kv_shape);
  hwyattn_tensor_contiguous(&to_pool, out_pool, HWYATTN_F32, 4, q_shape);
  hwyattn_tensor_contiguous(&to_own, out_own, HWYATTN_F32, 4, q_shape);

  /* The pool: 1 thread + the caller = 2 workers (use your core count). */
  if (!pool_start(&p, 1)) {
    fprintf(stderr, "cannot start the pool's threads\n");
    return 1;
  }
  hwyattn_parallel_init(&par);
  par.num_workers = p.num_threads + 1;
  par.pool = &p;
  par.parallel_for = pool_parallel_for;

  hwyattn_sdpa_options_init(&opts);
  opts.parallel = &par; /* every parallel phase of the call runs on p */
  bad |= failed(hwyattn_sdpa(&tq, &tk, &tv, &to_pool, &opts), "hwyattn_sdpa on the pool");
  opts.parallel = NULL; /* the library's own threads, for comparison */
  bad |= failed(hwyattn_sdpa(&tq, &tk, &tv, &to_own, &opts), "hwyattn_sdpa");

  /* A self-attention layer (8 heads of 32) on the same pool: the Q/K/V and
   * output projections run on it too. */
  hwyattn_mha_config_init(&cfg);
  cfg.embed_dim = E;
  cfg.num_heads = 8;
  memset(&mw, 0, sizeof(mw));
  mw.w_q = w;
  mw.w_k = w + E * E;
  mw.w_v = w + 2 * E * E;
  mw.w_o = w + 3 * E * E;
  bad |= failed(hwyattn_mha_create(&cfg, &mw, &layer), "hwyattn_mha_create");
  hwyattn_tensor_contiguous(&tx, x, HWYATTN_F32, 3, x_shape);
  hwyattn_tensor_contiguous(&ty_pool, y_pool, HWYATTN_F32, 3, x_shape);
  hwyattn_tensor_contiguous(&ty_own, y_own, HWYATTN_F32, 3, x_shape);
  if (layer != NULL) {
    opts.causal = HWYATTN_CAUSAL_TOP_LEFT;
    opts.parallel = &par;
    bad |= failed(hwyattn_mha_forward(layer, &tx, NULL, NULL, &ty_pool, &opts),
                  "hwyattn_mha_forward on the pool");
    opts.parallel = NULL;
    bad |=
        failed(hwyattn_mha_forward(layer, &tx, NULL, NULL, &ty_own, &opts), "hwyattn_mha_forward");
  }
  hwyattn_mha_destroy(layer);
  pool_stop(&p);
  if (bad) return 1;

  printf("SIMD target: %s\n", hwyattn_simd_target());
  printf("pool: %d workers, %ld parallel_for calls, %ld tasks\n", par.num_workers, p.jobs, p.tasks);
  printf("decode out[0][0][0][0..3]: %.6f %.6f %.6f %.6f\n", out_pool[0], out_pool[1], out_pool[2],
         out_pool[3]);
  if (memcmp(out_pool, out_own, sizeof(float) * B * HQ * LQ * D) != 0 ||
      memcmp(y_pool, y_own, sizeof(float) * 2 * L * E) != 0) {
    fprintf(stderr, "the pool's results differ from the library's own threads\n");
    return 1;
  }
  printf("same bits as the library's own threads: yes\n");
  if (p.jobs < 2 || p.tasks <= p.jobs) {
    fprintf(stderr, "the pool was not used for several workers\n");
    return 1;
  }
  free(q);
  free(k);
  free(v);
  free(out_pool);
  free(out_own);
  free(w);
  free(x);
  free(y_pool);
  free(y_own);
  return 0;
}
