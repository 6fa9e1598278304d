/* cuemu_internal.h: the emulated runtime's state, shared by cuemu.cc (the
 * launches, which set it) and cuemu_runtime.cc (the runtime API, which reads
 * and clears it). Not for the kernels or the tests: they see cuemu.h. */
#ifndef CUEMU_INTERNAL_H
#define CUEMU_INTERNAL_H

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

namespace cuemu {

extern std::mutex g_mu;                   /* one launch, allocation or stream change at a time */
extern thread_local cudaError_t g_last;   /* per host thread, as cudart: cleared by cudaGetLastError */
extern cudaError_t g_sticky;              /* a kernel fault: the context is lost */
extern std::map<const void *, int> g_max_dyn; /* cudaFuncSetAttribute's dynamic shared memory per kernel */

} /* namespace cuemu */

#endif
