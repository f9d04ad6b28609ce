#include <cstdio>
__global__ void add(float *x) { x[threadIdx.x] += 1.0f; }
int main() { float *d; cudaMalloc(&d, 128); add<<<1, 32>>>(d); cudaDeviceSynchronize(); cudaDeviceProp p; cudaGetDeviceProperties(&p, 0); printf("%d.%d\n", p.major, p.minor); return 0; }
