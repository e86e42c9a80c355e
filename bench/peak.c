/* fp32 FMA peak of this machine: N threads × 12 independent AVX-512 FMA chains (2 FLOP/lane).
 * Built and run by bench/engine.ts: gcc -O2 -mavx512f -mfma -fopenmp peak.c */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define ACC 12
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static float chains(long iters) {
  __m512 a[ACC], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < ACC; i++) a[i] = _mm512_set1_ps((float)i);
  for (long it = 0; it < iters; it++)
#pragma GCC unroll 12
    for (int i = 0; i < ACC; i++) a[i] = _mm512_fmadd_ps(a[i], x, y);
  __m512 s = a[0];
  for (int i = 1; i < ACC; i++) s = _mm512_add_ps(s, a[i]);
  float o[16]; _mm512_storeu_ps(o, s); return o[0];
}
int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  long iters = 100000000;
  double sink = 0, t0;
  omp_set_num_threads(threads);
  t0 = now();
#pragma omp parallel reduction(+ : sink)
  sink += chains(iters);
  double t = now() - t0;
  printf("%.1f\n", threads * (double)iters * ACC * 16 * 2 / t / 1e9);
  return sink == 12345.0;
}
