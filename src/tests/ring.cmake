# ring: communication kernel (pingpong, bw, ring).  Small sizes, scaled-down
# iteration counts: every case runs in well under a second.
set(RING_QUICK --sizes 8,1000,65536,1048576 --iters-scale 0.05 --reps 2)
kernel_test(ring_pingpong_2x1 NP 2 THREADS 1 COMMAND ring --pattern pingpong ${RING_QUICK})
kernel_test(ring_bw_2x1 NP 2 THREADS 1 COMMAND ring --pattern bw ${RING_QUICK})
kernel_test(ring_bw_small_window_2x1 NP 2 THREADS 1 COMMAND ring --pattern bw --window 3 --sizes 1:4K --iters-scale 0.05)
# above 1 MiB a verified window of 22 does not fit 64 MiB of slots: it is
# received in rounds (3 MiB: 21 + 1; 16 MiB: 5 x 4 + 2), every message checked
kernel_test(ring_bw_rounds_2x1 NP 2 THREADS 1 COMMAND ring --pattern bw --window 22 --sizes 3M,16M --iters 1 --skip 0 --reps 1)
set_tests_properties(ring_bw_rounds_2x1 PROPERTIES PASS_REGULAR_EXPRESSION
  "\"size\":3145728,.*\"verified\":true.*\"size\":16777216,.*\"verified\":true")
kernel_test(ring_ring_mpi_2x1 NP 2 THREADS 1 COMMAND ring --pattern ring --rank-as-node ${RING_QUICK})
kernel_test(ring_ring_shared_2x1 NP 2 THREADS 1 COMMAND ring --pattern ring --k 1 ${RING_QUICK})
kernel_test(ring_ring_masteronly_1x2 NP 1 THREADS 2 COMMAND ring --pattern ring --mode masteronly --rank-as-node ${RING_QUICK})
kernel_test(ring_ring_multiple_1x2 NP 1 THREADS 2 COMMAND ring --pattern ring --mode multiple --rank-as-node ${RING_QUICK})
kernel_test(ring_pingpong_masteronly_2x2 NP 2 THREADS 2 COMMAND ring --pattern pingpong --mode masteronly ${RING_QUICK})
kernel_test(ring_odd_sizes_2x1 NP 2 THREADS 1 COMMAND ring --pattern pingpong --sizes 1,3,7,9,1023 --iters-scale 0.01 --reps 1)
# The documented quick run of the ReFrame check.
kernel_test(ring_quick_2x1 NP 2 THREADS 1 COMMAND ring --pattern ring --rank-as-node --sizes 8,65536,1048576 --iters-scale 0.05)
# Bad input: clear message, non-zero exit.
kernel_test(ring_bad_size_zero NP 1 THREADS 1 EXPECT_FAIL "ring: --sizes: size '0' is out of range" COMMAND ring --sizes 0)
kernel_test(ring_bad_size_big NP 1 THREADS 1 EXPECT_FAIL "ring: --sizes: size '32M' is out of range" COMMAND ring --sizes 8,32M)
# sizes too large for a long (with or without a suffix) are out of range too, not "not a size"
kernel_test(ring_bad_size_huge_mib NP 1 THREADS 1 EXPECT_STATUS 2 EXPECT_FAIL "ring: --sizes: size '99999999999999M' is out of range \\(1 B \\.\\. 16 MiB\\)" COMMAND ring --sizes 99999999999999M)
kernel_test(ring_bad_size_long_max NP 1 THREADS 1 EXPECT_STATUS 2 EXPECT_FAIL "ring: --sizes: size '9223372036854775807' is out of range \\(1 B \\.\\. 16 MiB\\)" COMMAND ring --sizes 9223372036854775807)
kernel_test(ring_bad_size_beyond_long NP 1 THREADS 1 EXPECT_STATUS 2 EXPECT_FAIL "ring: --sizes: size '99999999999999999999K' is out of range \\(1 B \\.\\. 16 MiB\\)" COMMAND ring --sizes 8,99999999999999999999K)
# the 64-size limit is on the entries given: 65 entries of one size fail, saying so
string(REPEAT "8," 64 _ring_65)
kernel_test(ring_bad_size_65_entries NP 1 THREADS 1 EXPECT_STATUS 2 EXPECT_FAIL "ring: --sizes: more than 64 entries \\(repeated sizes count too\\)" COMMAND ring --sizes ${_ring_65}8)
# a size is digits (the harness's units.ring_size says so): a '+' sign and a
# leading blank passed kc_parse_long (strtol) and ran 8 B
# leading zeros are a size's own, however many (32 characters were out of range)
kernel_test(ring_size_leading_zeros NP 2 THREADS 1 COMMAND ring --pattern pingpong --sizes 00000000000000000000000000000008,0016 --iters 2 --reps 1)
set_tests_properties(ring_size_leading_zeros PROPERTIES PASS_REGULAR_EXPRESSION
  "\"size\":8,.*\"size\":16,")
kernel_test(ring_bad_size_plus NP 1 THREADS 1 EXPECT_STATUS 2 EXPECT_FAIL "ring: --sizes: '\\+8' is not a size" COMMAND ring --sizes +8)
kernel_test(ring_bad_size_blank NP 1 THREADS 1 EXPECT_STATUS 2 EXPECT_FAIL "ring: --sizes: ' 8' is not a size" COMMAND ring --sizes "16, 8")
kernel_test(ring_bad_size_range NP 1 THREADS 1 EXPECT_FAIL "ring: --sizes: range '1M:1K' has MIN > MAX" COMMAND ring --sizes 1M:1K)
kernel_test(ring_size_range_not_powers_of_two NP 1 THREADS 1 EXPECT_FAIL "ring: --sizes: range '3:100' is not of powers of two" COMMAND ring --sizes 3:100)
kernel_test(ring_bad_k NP 2 THREADS 1 EXPECT_FAIL "ring: --k 2 is larger than the 1 ranks per node" COMMAND ring --rank-as-node --k 2 --sizes 8)
kernel_test(ring_bad_size_empty NP 1 THREADS 1 EXPECT_STATUS 2 EXPECT_FAIL "ring: --sizes: '' is not a size" COMMAND ring --sizes ,8)
kernel_test(ring_bad_size_trailing_comma NP 1 THREADS 1 EXPECT_STATUS 2 EXPECT_FAIL "ring: --sizes: '' is not a size" COMMAND ring --sizes 8,)
kernel_test(ring_bad_size_empty_range NP 1 THREADS 1 EXPECT_STATUS 2 EXPECT_FAIL "ring: --sizes: '' is not a size" COMMAND ring --sizes :8)
kernel_test(ring_bad_rank_as_node_pt2pt NP 2 THREADS 1 EXPECT_STATUS 2 EXPECT_FAIL "ring: --rank-as-node applies only to --pattern ring" COMMAND ring --pattern pingpong --rank-as-node --sizes 8)
if(KERNEL_OPENMP) # a pure MPI build runs 1 thread whatever OMP_NUM_THREADS says
  kernel_test(ring_bad_k_multiple NP 1 THREADS 2 EXPECT_FAIL "ring: --k 3 is larger than the 2 threads per rank" COMMAND ring --mode multiple --k 3 --sizes 8)
  # OMP_THREAD_LIMIT=1: a team of 1 thread, not the 2 that OMP_NUM_THREADS asks
  # for; the lane of the second thread would never communicate
  kernel_test(ring_multiple_thread_limit NP 2 THREADS 2 ENV OMP_THREAD_LIMIT=1 EXPECT_STATUS 2
              EXPECT_FAIL "ring: mode multiple needs 2 threads per rank \\(k\\) but the OpenMP team has only 1 of the 2 asked for"
              COMMAND ring --mode multiple --sizes 64K --iters 10 --reps 1)
  # ranks of different thread counts (MPMD: rank 1 runs 2 threads, rank 0 one):
  # k would differ between the ranks, so masteronly's messages differed in size
  # (MPI_ERR_TRUNCATE) and multiple's second lane waited for ever; refused
  foreach(_m masteronly multiple)
    uneven_threads_test(ring_${_m}_uneven_threads
      EXPECT_FAIL "ring: ranks run different thread counts \\(1\\.\\.2 of 1\\.\\.2 asked for, OMP_NUM_THREADS\\): mode ${_m} needs the same threads on every rank"
      COMMAND ring --mode ${_m} --rank-as-node --sizes 8 --iters 5 --reps 1)
  endforeach()
endif()
kernel_test(ring_bad_pingpong_1 NP 1 THREADS 1 EXPECT_FAIL "ring: pattern pingpong needs at least 2 ranks" COMMAND ring --pattern pingpong --sizes 8)
kernel_test(ring_bad_bw_1 NP 1 THREADS 1 EXPECT_FAIL "ring: pattern bw needs at least 2 ranks" COMMAND ring --pattern bw --sizes 8)
kernel_test(ring_bad_mode NP 1 THREADS 1 EXPECT_FAIL "ring: mode funneled is not supported" COMMAND ring --mode funneled)
kernel_test(ring_bad_multiple_pattern NP 2 THREADS 1 EXPECT_FAIL "ring: mode multiple is only available with --pattern ring" COMMAND ring --pattern pingpong --mode multiple)
kernel_test(ring_bad_scale NP 1 THREADS 1 EXPECT_FAIL "ring: --iters-scale must be" COMMAND ring --iters-scale 0)
# pingpong and bw count as OSU 5.9: osu_bw 100 windows after 10 skipped up to
# 8 KiB, 20 after 2 above; osu_latency 10000 after 100, 1000 after 10.
kernel_test(ring_osu_counts_bw_2x1 NP 2 THREADS 1 COMMAND ring --pattern bw --sizes 8,8K,16K --reps 1)
set_tests_properties(ring_osu_counts_bw_2x1 PROPERTIES PASS_REGULAR_EXPRESSION
  "\"size\":8,.*\"iters\":100,\"warmup\":10,.*\"window\":64,.*\"skip\":10,\"timer\":\"sender, per iteration \\(OSU 5.9\\)\".*\"verified\":true.*\"size\":8192,.*\"iters\":100,\"warmup\":10,.*\"size\":16384,.*\"iters\":20,\"warmup\":2,.*\"skip\":2,.*\"verified\":true")
kernel_test(ring_osu_counts_pingpong_2x1 NP 2 THREADS 1 COMMAND ring --pattern pingpong --sizes 8,16K --reps 1)
set_tests_properties(ring_osu_counts_pingpong_2x1 PROPERTIES PASS_REGULAR_EXPRESSION
  "\"size\":8,.*\"iters\":10000,\"warmup\":100,.*\"verified\":true.*\"size\":16384,.*\"iters\":1000,\"warmup\":10,.*\"verified\":true")
# --iters and --skip as OSU's -i and -x
kernel_test(ring_iters_skip_2x1 NP 2 THREADS 1 COMMAND ring --pattern bw --sizes 1K --iters 7 --skip 0 --reps 2)
set_tests_properties(ring_iters_skip_2x1 PROPERTIES PASS_REGULAR_EXPRESSION
  "\"iters\":7,\"warmup\":0,.*\"skip\":0,.*\"verified\":true")
# --min-time (ring pattern): 1 requested exchange grows to last 1 s
kernel_test(ring_min_time_2x1 NP 2 THREADS 1 COMMAND ring --pattern ring --rank-as-node --sizes 8 --iters 1 --reps 1 --min-time 1)
set_tests_properties(ring_min_time_2x1 PROPERTIES PASS_REGULAR_EXPRESSION
  "\"iters\":([2-9]|[1-9][0-9]+),.*\"min_time_s\":1,\"verified\":true")
# the calibration of --min-time is timed until a batch lasts S/10 (as spmv's):
# it was one loop of --iters exchanges, with --iters 1 a single exchange of a few
# microseconds, and the repetitions it sized lasted 0.04 s of the 0.5 s asked for
kernel_test(ring_min_time_calibration_2x1 NP 2 THREADS 1 COMMAND ring --pattern ring --rank-as-node --sizes 8 --iters 1 --reps 1 --min-time 1)
set_tests_properties(ring_min_time_calibration_2x1 PROPERTIES PASS_REGULAR_EXPRESSION
  "\"calib_iters\":[1-9][0-9]*,\"calib_t_s\":(0\\.[1-9]|[1-9])[^,]*,\"min_time_s\":1,\"verified\":true")
kernel_bad_min_time(ring "" -1)
kernel_bad_min_time(ring "_text" abc)
kernel_test(ring_bad_min_time_pt2pt NP 2 THREADS 1 EXPECT_STATUS 2 EXPECT_FAIL "ring: --min-time applies only to --pattern ring" COMMAND ring --pattern bw --min-time 1)
kernel_test(ring_bad_iters_and_scale NP 1 THREADS 1 EXPECT_STATUS 2 EXPECT_FAIL "ring: --iters and --iters-scale exclude each other" COMMAND ring --iters 5 --iters-scale 2)
kernel_test(ring_bad_skip NP 1 THREADS 1 EXPECT_STATUS 2 EXPECT_FAIL "ring: --skip must be an integer" COMMAND ring --skip -3)
# Fault-injection builds (-DKERNEL_FAULT_INJECT=ON) only: the receiver of the
# largest size corrupts one byte; the ring must say which rank received it from
# whom and exit 3 (run by tests/test_kernels.py on every stack found).
if(KERNEL_FAULT_INJECT)
  # (the message's ";" as "." here: in CMake a ";" splits the argument)
  set(_ring_fault "ring: verification FAILED: size 4096 B: 1 wrong byte\\(s\\) received. first on rank")
  kernel_test(ring_fault_pingpong_2x1 NP 2 THREADS 1 EXPECT_STATUS 3
              EXPECT_FAIL "${_ring_fault} 0 in the message from rank 1"
              COMMAND ring --pattern pingpong --sizes 8,4096 --iters-scale 0.01 --reps 1)
  kernel_test(ring_fault_bw_3x1 NP 3 THREADS 1 EXPECT_STATUS 3
              EXPECT_FAIL "${_ring_fault} 2 in the message from rank 0"
              COMMAND ring --pattern bw --sizes 8,4096 --iters-scale 0.05 --reps 1)
  kernel_test(ring_fault_ring_mpi_2x1 NP 2 THREADS 1 EXPECT_STATUS 3
              EXPECT_FAIL "${_ring_fault} 0 in the message from rank 1"
              COMMAND ring --pattern ring --rank-as-node --sizes 8,4096 --iters-scale 0.01 --reps 1)
  kernel_test(ring_fault_ring_multiple_1x2 NP 1 THREADS 2 EXPECT_STATUS 3
              EXPECT_FAIL "${_ring_fault} 0 in the message from rank 0"
              COMMAND ring --pattern ring --mode multiple --rank-as-node --sizes 8,4096 --iters-scale 0.01 --reps 1)
endif()
# Named fault (KERNEL_FAULT=ring_msg_bytes): masteronly's message carries size
# bytes instead of k x size while the bandwidth counts k x size: the bytes the
# figures count must be the bytes sent (exit 3).  Named so that ^ring_fault_
# (the corrupted-byte cases above) does not select it.
if(KERNEL_FAULT_INJECT AND KERNEL_OPENMP)
  named_fault(ring_msg_bytes _1x2 NP 1 THREADS 2
              EXPECT_FAIL "\"verified\":false.*ring: verification FAILED: size 8 B: the MPI messages carry 8 bytes per iteration over all ranks \\(msg_bytes 8\\) but the bandwidth counts 16"
              COMMAND ring --pattern ring --mode masteronly --rank-as-node --sizes 8,4096 --iters-scale 0.01 --reps 1)
endif()
# Named fault (KERNEL_FAULT=ring_bw_slot): in bw's verified window the last
# message lands in the slot of its round's first.  At 2 MiB (window 64: two
# rounds of 32 slots) this passed when message j went to slot j mod 32 and
# every message carried one pattern: slot 31 got message 31, slot 0 the same bytes.
if(KERNEL_FAULT_INJECT)
  named_fault(ring_bw_slot _2x1 NP 2 THREADS 1
              EXPECT_FAIL "\"verified\":false.*ring: verification FAILED: size 2097152 B: [0-9]+ wrong byte\\(s\\) received. first on rank 1 in the message from rank 0"
              COMMAND ring --pattern bw --sizes 2M --iters 1 --skip 0 --reps 1)
endif()
