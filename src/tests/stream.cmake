kernel_test(stream_mpi_2x1 NP 2 THREADS 1 COMMAND stream --n 100000 --iters 3)
kernel_test(stream_masteronly_1x2 NP 1 THREADS 2 COMMAND stream --mode masteronly --n 100000 --iters 3)
kernel_test(stream_bad_size NP 1 THREADS 1 EXPECT_FAIL "^stream: --n must be" COMMAND stream --n 0)
kernel_test(stream_bad_mode NP 1 THREADS 1 EXPECT_FAIL "stream: unknown or unsupported mode" COMMAND stream --mode bogus)
