// SPDX-License-Identifier: Apache-2.0
//
// greedy_margins: greedy decoding through llama.cpp's C API (llama.h) with
// each step's logits summarized, so that two attention paths' texts can be
// compared token by token and a first difference judged against a
// reference's logits (ggml/llama_cpp_test.sh, step 4).
//
//   greedy_margins <model.gguf> <threads> <fa: 0|1> <cache: f32|f16> <n> <prompt> [token ...]
//
// Evaluates the prompt (tokenized as llama-completion does: with the
// model's BOS) followed by the given token ids, then takes n greedy steps.
// Prints one line per step: "<token> <its logit> <second token> <its
// logit>", each followed by the logits of the tokens the caller names in the
// environment variable GREEDY_MARGINS_WATCH (a comma-separated list of ids)
// as "watch <id> <logit>". Logits are the model's raw outputs: the difference of two is
// the difference of their log-probabilities. llama.cpp's backends load from
// the directory in GREEDY_MARGINS_BACKENDS (else ggml's default places), an
// extra one from GGML_BACKEND_PATH as in llama.cpp's tools.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "llama.h"

static void quiet(enum ggml_log_level level, const char* text, void* user) {
  (void)user;
  if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char** argv) {
  if (argc < 7) {
    fprintf(
        stderr,
        "usage: %s <model.gguf> <threads> <fa: 0|1> <cache: f32|f16> <n> <prompt> [token ...]\n",
        argv[0]);
    return 2;
  }
  const char* model_path = argv[1];
  const int threads = atoi(argv[2]);
  const int fa = atoi(argv[3]);
  const int f16 = strcmp(argv[4], "f16") == 0;
  const int steps = atoi(argv[5]);
  const char* prompt = argv[6];
  if (!f16 && strcmp(argv[4], "f32") != 0) {
    fprintf(stderr, "cache: '%s' is neither f32 nor f16\n", argv[4]);
    return 2;
  }
  // GGML_HWYATTN_STATS and llama.cpp's own logs go to stderr; errors only.
  llama_log_set(quiet, NULL);
  // llama.cpp's backends (libggml-cpu*.so) beside its tools: their directory
  // in GREEDY_MARGINS_BACKENDS, else where ggml looks by default.
  const char* backends = getenv("GREEDY_MARGINS_BACKENDS");
  if (backends != NULL) {
    ggml_backend_load_all_from_path(backends);
  } else {
    ggml_backend_load_all();
  }
  llama_backend_init();

  struct llama_model_params mp = llama_model_default_params();
  struct llama_model* model = llama_model_load_from_file(model_path, mp);
  if (model == NULL) {
    fprintf(stderr, "cannot load %s\n", model_path);
    return 1;
  }
  const struct llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);

  // The context holds the prompt, the given tokens and the steps.
  const int context = 1024;
  llama_token* tokens = (llama_token*)malloc(sizeof(llama_token) * context);
  int n = llama_tokenize(vocab, prompt, (int)strlen(prompt), tokens, context, true, false);
  if (n < 0 || n + (argc - 7) + steps > context) {
    fprintf(stderr, "prompt too long\n");
    return 1;
  }
  for (int i = 7; i < argc; ++i) tokens[n++] = atoi(argv[i]);

  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = context;
  cp.n_batch = context;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.flash_attn_type = fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.type_k = f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
  cp.type_v = cp.type_k;
  struct llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == NULL) {
    fprintf(stderr, "cannot create a context\n");
    return 1;
  }

  if (llama_decode(ctx, llama_batch_get_one(tokens, n)) != 0) {
    fprintf(stderr, "llama_decode failed\n");
    return 1;
  }
  for (int step = 0; step < steps; ++step) {
    const float* logits = llama_get_logits_ith(ctx, -1);
    int best = 0, second = 1;
    if (logits[second] > logits[best]) best = 1, second = 0;
    for (int t = 2; t < n_vocab; ++t) {
      if (logits[t] > logits[best]) {
        second = best;
        best = t;
      } else if (logits[t] > logits[second]) {
        second = t;
      }
    }
    printf("%d %.6f %d %.6f\n", best, logits[best], second, logits[second]);
    if (getenv("GREEDY_MARGINS_WATCH") != NULL) {
      char* list = strdup(getenv("GREEDY_MARGINS_WATCH"));
      for (char* id = strtok(list, ","); id != NULL; id = strtok(NULL, ",")) {
        const int t = atoi(id);
        if (t >= 0 && t < n_vocab) printf("watch %d %.6f\n", t, logits[t]);
      }
      free(list);
    }
    if (llama_vocab_is_eog(vocab, best) || step + 1 == steps) break;
    llama_token next = best;
    if (llama_decode(ctx, llama_batch_get_one(&next, 1)) != 0) {
      fprintf(stderr, "llama_decode failed\n");
      return 1;
    }
  }
  llama_free(ctx);
  llama_model_free(model);
  free(tokens);
  return 0;
}
