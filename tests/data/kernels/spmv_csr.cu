// y = A @ x for a CSR matrix, one thread per row: the column indices make the reads
// of x data-dependent.
extern "C" __global__ void spmv_csr(const int* __restrict__ row_ptr,
                                    const int* __restrict__ col_idx,
                                    const float* __restrict__ values,
                                    const float* __restrict__ x, float* __restrict__ y,
                                    int rows) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < rows) {
    float dot = 0.0f;
    const int begin = row_ptr[row];
    const int end = row_ptr[row + 1];
    for (int j = begin; j < end; ++j) dot += values[j] * x[col_idx[j]];
    y[row] = dot;
  }
}
