kernel_test(stream_mpi_2x1 NP 2 THREADS 1 COMMAND stream --n 100000 --iters 3)
kernel_test(stream_masteronly_1x2 NP 1 THREADS 2 COMMAND stream --mode masteronly --n 100000 --iters 3)
kernel_test(stream_bad_size NP 1 THREADS 1 EXPECT_FAIL "^stream: --n must be" COMMAND stream --n 0)
# number options are plain decimal (kc_parse_long): strtol took a leading blank
# and a '+' sign ("--n ' 4'" ran 4 elements per core); refused, the form named
foreach(_case "blank; 4; 4" "plus;+4;\\+4" "trailing_blank;4 ;4 ")
  list(GET _case 0 _id)
  list(GET _case 1 _v)
  list(GET _case 2 _re)
  kernel_test(stream_bad_n_${_id} NP 1 THREADS 1 EXPECT_STATUS 2
              EXPECT_FAIL "^stream: --n must be an integer in \\[1, 17179869184\\], got '${_re}' \\(plain decimal digits only\\)"
              COMMAND stream --n "${_v}")
endforeach()
# arrays that do not fit in the node's memory are refused before they are touched
# (3 arrays of 2^34 doubles: 412 GB), not killed by the OOM killer on first touch
kernel_test(stream_bad_size_memory NP 1 THREADS 1 EXPECT_STATUS 2 EXPECT_FAIL "^stream: --n 17179869184 does not fit: 1 rank\\(s\\) per node x 412 GB for 3 arrays of 17179869184 doubles per rank exceed 90% of the node's" COMMAND stream --n 17179869184)
kernel_test(stream_bad_mode NP 1 THREADS 1 EXPECT_FAIL "stream: unknown or unsupported mode" COMMAND stream --mode bogus)
# a short option (none exists) is named, not the argument before it
kernel_test(stream_bad_short_option NP 1 THREADS 1 EXPECT_STATUS 2 EXPECT_FAIL "stream: unknown option '-x'" COMMAND stream --n 5 -xy)
# OMP_THREAD_LIMIT=1 gives a team of 1 although OMP_NUM_THREADS asks for 2: the
# RESULT line reports the threads that ran (kc_start measures the team)
kernel_test(stream_thread_limit_1x2 NP 1 THREADS 2 ENV OMP_THREAD_LIMIT=1 COMMAND stream --mode masteronly --n 100000 --iters 3)
set_tests_properties(stream_thread_limit_1x2 PROPERTIES PASS_REGULAR_EXPRESSION
  "\"threads\":1,.*\"cpus\":\\[\\[-?[0-9]+\\]\\].*\"verified\":true")
# ranks of different thread counts (MPMD: rank 1 runs 2 threads, rank 0 one):
# the bandwidth counted rank 0's arrays on every rank (3.56 GB/s for 3 of 2
# million elements, "threads":1); refused as spmv does
uneven_threads_test(stream_uneven_threads
  EXPECT_FAIL "stream: ranks run different thread counts \\(1\\.\\.2\\): every rank must own the same arrays"
  COMMAND stream --mode masteronly --n 100000 --iters 3)
# Named fault (KERNEL_FAULT=stream_half_triad): the timed repetitions cover
# half the array; the check from the initial arrays, the scalar and the count
# of repetitions catches it (exit 3).
if(KERNEL_FAULT_INJECT)
  named_fault(stream_half_triad _2x1 NP 2 THREADS 1
              EXPECT_FAIL "\"verified\":false.*stream: verification FAILED: [1-9][0-9]* wrong values in a, b, c after 4 triads"
              COMMAND stream --n 100000 --iters 3)
endif()
