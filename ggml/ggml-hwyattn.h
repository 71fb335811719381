/* SPDX-License-Identifier: Apache-2.0
 *
 * ggml-hwyattn.h: what libggml-hwyattn.so offers beyond ggml's backend
 * interface. A ggml program needs none of it: GGML_BACKEND_PATH=<path to
 * libggml-hwyattn.so> makes ggml_backend_load_all() register the HWYATTN
 * device, and ggml's scheduler then runs GGML_OP_FLASH_ATTN_EXT on it (the
 * cases supports_op accepts) and everything else on the CPU backend.
 *
 * Both functions are reached through the registry, as ggml's CPU and BLAS
 * backends offer theirs (no link-time dependency on this library):
 *
 *   ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
 *   ggml_backend_set_n_threads_t set_n_threads = (ggml_backend_set_n_threads_t)
 *       ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads");
 *   ggml_backend_hwyattn_set_parallel_t set_parallel = (ggml_backend_hwyattn_set_parallel_t)
 *       ggml_backend_reg_get_proc_address(reg, "ggml_backend_hwyattn_set_parallel");
 */
#ifndef HWYATTN_GGML_HWYATTN_H_
#define HWYATTN_GGML_HWYATTN_H_

#include "ggml-backend.h"
#include "hwyattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "ggml_backend_set_n_threads" (ggml's ggml_backend_set_n_threads_t): the
 * threads each flash attention of this backend runs on, >= 1 (default 2;
 * values < 1 are taken as 1). Per backend: it is passed to hwyattn as a pool
 * of that many OpenMP threads, never set process-wide. */

/* "ggml_backend_hwyattn_set_parallel": runs this backend's calls on the
 * caller's thread pool (hwyattn_parallel, include/hwyattn.h: copied here,
 * and its pool pointer must stay valid while the backend computes), or on
 * the backend's own threads again with NULL. */
typedef void (*ggml_backend_hwyattn_set_parallel_t)(ggml_backend_t backend,
                                                    const hwyattn_parallel* parallel);

#ifdef __cplusplus
}
#endif

#endif /* HWYATTN_GGML_HWYATTN_H_ */
