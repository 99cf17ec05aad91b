/* Float32 elementary functions as PyTorch's CPU kernels compute them, for compat=hf.
 *
 * torch.exp on a float32 tensor runs SLEEF's expf (u10) on AVX2 machines, which differs from
 * glibc's expf in the last bit for about one input in ten; a frequency one ulp off moves the angle
 * at long positions by far more than an ulp. We call the same SLEEF function (Debian's libsleef,
 * the FMA build, as PyTorch's AVX2 kernels are) so frequencies match PyTorch bit for bit. CPUs
 * without FMA fall back to SLEEF's portable u10 expf, which is within 1 ulp but not bit-identical
 * (PyTorch itself uses libm there). */
#include "core/torchmath.h"

#include <sleef.h>

/* sleef.h declares the FMA builds only when this file is compiled with -mfma (FP_FAST_FMA); it
 * must not be, since it also runs on CPUs without FMA. The symbol is in every libsleef. */
float Sleef_expf1_u10purecfma(float x);

static int has_fma(void)
{
	static int cached = -1;
	if (cached < 0) {
		__builtin_cpu_init();
		cached = __builtin_cpu_supports("fma") ? 1 : 0;
	}
	return cached;
}

float pe_torch_expf(float x) { return has_fma() ? Sleef_expf1_u10purecfma(x) : Sleef_expf_u10(x); }
