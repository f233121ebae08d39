# spmv: Chow & Hysom hybrid SpMV.  Every run verifies y against a stencil
# recomputation in global coordinates (wrong y => exit 3).
kernel_test(spmv_mpi_1x1 NP 1 THREADS 1 COMMAND spmv --n 8 --iters 5)
kernel_test(spmv_mpi_2x1 NP 2 THREADS 1 COMMAND spmv --n 12 --iters 10)
kernel_test(spmv_masteronly_1x2 NP 1 THREADS 2 COMMAND spmv --mode masteronly --n 12 --iters 10)
kernel_test(spmv_funneled_1x2 NP 1 THREADS 2 COMMAND spmv --mode funneled --n 12 --iters 10)
kernel_test(spmv_funneled_2x2 NP 2 THREADS 2 COMMAND spmv --mode funneled --n 6 --iters 5)
kernel_test(spmv_funneled_1thread NP 2 THREADS 1 COMMAND spmv --mode funneled --n 6 --iters 5)
kernel_test(spmv_masteronly_2x2 NP 2 THREADS 2 COMMAND spmv --mode masteronly --n 6 --iters 5)
# 1 rank x 2 threads with a box of 40x20x20: many interior (27-nonzero, software-prefetched) rows
kernel_test(spmv_masteronly_1x2_n20 NP 1 THREADS 2 COMMAND spmv --mode masteronly --n 20 --iters 3)
kernel_test(spmv_serial_decomp2 NP 1 THREADS 1 COMMAND spmv --mode serial --decomp-threads 2 --n 12 --iters 10)
kernel_test(spmv_serial_decomp8_2ranks NP 2 THREADS 1 COMMAND spmv --mode serial --decomp-threads 8 --n 4 --iters 3)
# 3 ranks: rank grid 3x1x1 (non-cubic); 4 ranks: 2x2x1 with edge neighbours;
# 8 ranks: 2x2x2, every rank has corner, edge and face neighbours (oversubscribed, tiny)
kernel_test(spmv_mpi_3x1 NP 3 THREADS 1 COMMAND spmv --n 5 --iters 5)
kernel_test(spmv_mpi_4x1 NP 4 THREADS 1 COMMAND spmv --n 4 --iters 3)
kernel_test(spmv_mpi_8x1 NP 8 THREADS 1 COMMAND spmv --n 3 --iters 3)
kernel_test(spmv_n1 NP 2 THREADS 1 COMMAND spmv --n 1 --iters 2)
kernel_test(spmv_times_file NP 2 THREADS 1 COMMAND spmv --n 4 --iters 4 --times-file ${CMAKE_CURRENT_BINARY_DIR}/spmv_times.txt)
# bad input
kernel_test(spmv_bad_size_zero NP 1 THREADS 1 EXPECT_FAIL "spmv: --n must be" COMMAND spmv --n 0)
kernel_test(spmv_bad_size_negative NP 1 THREADS 1 EXPECT_FAIL "spmv: --n must be" COMMAND spmv --n -4)
kernel_test(spmv_bad_size_overflow NP 2 THREADS 1 EXPECT_FAIL "spmv: --n 5000 is too large.*32-bit" COMMAND spmv --n 5000)
# --n 200 fits one core's box (8e6 rows) but not the 4N x 2N x 2N box of 16 threads
kernel_test(spmv_bad_size_decomp NP 1 THREADS 1 EXPECT_FAIL "spmv: --n 200 is too large: a box of 800 x 400 x 400 \\(16 threads\\)" COMMAND spmv --mode serial --decomp-threads 16 --n 200)
kernel_test(spmv_bad_mode NP 1 THREADS 1 EXPECT_FAIL "spmv: unknown mode 'bogus'" COMMAND spmv --mode bogus)
kernel_test(spmv_bad_mode_multiple NP 1 THREADS 2 EXPECT_FAIL "spmv: mode multiple is not supported" COMMAND spmv --mode multiple)
if(KERNEL_OPENMP) # a pure MPI build runs 1 thread whatever OMP_NUM_THREADS says
  kernel_test(spmv_bad_threads NP 1 THREADS 512 EXPECT_FAIL "spmv: 512 threads per rank .* exceed the [0-9]+ online cores" COMMAND spmv --mode masteronly --n 4)
  uneven_threads_test(spmv_uneven_threads
    EXPECT_FAIL "spmv: ranks run different thread counts \\(1\\.\\.2\\): every rank must own the same box"
    COMMAND spmv --mode masteronly --n 4 --iters 2)
endif()
if(KERNEL_OPENMP)
  # a later parallel region's team larger than the one kc_start measured
  # (OMP_DYNAMIC=true with the load gone: loaded_once.c) wrote past funneled's
  # per-thread times (ASan: heap-buffer-overflow in call_funneled); the calls'
  # regions are capped at the measured team, as md's force loop is
  add_library(loaded_once MODULE tests/loaded_once.c)
  kernel_test(spmv_funneled_dynamic_team NP 1 THREADS 2
              ENV OMP_DYNAMIC=true LD_PRELOAD=$<TARGET_FILE:loaded_once>
                  OMPI_MCA_hwloc_base_binding_policy=none
                  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:verify_asan_link_order=0
              COMMAND spmv --mode funneled --n 4 --iters 2)
  set_tests_properties(spmv_funneled_dynamic_team PROPERTIES PASS_REGULAR_EXPRESSION
    "\"threads\":1,.*\"verified\":true")
endif()
kernel_test(spmv_bad_decomp_mode NP 1 THREADS 1 EXPECT_FAIL "spmv: --decomp-threads applies to --mode serial only" COMMAND spmv --mode mpi --decomp-threads 2)
kernel_test(spmv_bad_times_file NP 1 THREADS 1 EXPECT_FAIL "spmv: cannot open --times-file" COMMAND spmv --n 2 --iters 1 --times-file /nonexistent/dir/t.txt)
# a times file that opens but cannot be written (a full disk: /dev/full) fails
# with status 2, not exit 0 with the per-call times lost
kernel_test(spmv_bad_times_file_full NP 2 THREADS 1 EXPECT_STATUS 2 EXPECT_FAIL "spmv: cannot write --times-file '/dev/full': No space left on device" COMMAND spmv --n 2 --iters 1 --times-file /dev/full)
# interior/boundary split of the compute time (Rabenseifner's overlap model):
# the RESULT line carries both sums and their {min,mean,max}; the regex also
# demands "verified":true (PASS_REGULAR_EXPRESSION replaces the exit-code check)
set(spmv_split_re "\"t_comp_interior_s\":[0-9][^,]*,\"t_comp_boundary_s\":[0-9][^,]*,\"t_comp_interior\":{\"min\":[^}]*},\"t_comp_boundary\":{\"min\":[^}]*}")
kernel_test(spmv_split_mpi_2x1 NP 2 THREADS 1 COMMAND spmv --n 8 --iters 5)
set_tests_properties(spmv_split_mpi_2x1 PROPERTIES PASS_REGULAR_EXPRESSION
  "${spmv_split_re}.*\"interior_rows\":448,\"boundary_rows\":64,.*\"verified\":true")
if(KERNEL_OPENMP) # the row counts are those of a box of 2 threads
  kernel_test(spmv_split_masteronly_1x2 NP 1 THREADS 2 COMMAND spmv --mode masteronly --n 8 --iters 5)
  set_tests_properties(spmv_split_masteronly_1x2 PROPERTIES PASS_REGULAR_EXPRESSION
    "${spmv_split_re}.*\"interior_rows\":1024,\"boundary_rows\":0,.*\"verified\":true")
  kernel_test(spmv_split_funneled_2x2 NP 2 THREADS 2 COMMAND spmv --mode funneled --n 4 --iters 3)
  set_tests_properties(spmv_split_funneled_2x2 PROPERTIES PASS_REGULAR_EXPRESSION
    "${spmv_split_re}.*\"interior_rows\":112,\"boundary_rows\":16,.*\"verified\":true")
endif()
# --min-time: 1 requested call on a tiny box grows to last 1 s (2+ calls
# unless one call takes 0.5 s); still verified, the same count on every rank
kernel_test(spmv_min_time_2x1 NP 2 THREADS 1 COMMAND spmv --n 4 --iters 1 --min-time 1)
set_tests_properties(spmv_min_time_2x1 PROPERTIES PASS_REGULAR_EXPRESSION
  "\"iters\":([2-9]|[1-9][0-9]+),.*\"iters_requested\":1,\"min_time_s\":1,\"calib_calls\":[1-9][0-9]*,\"calib_t_call_s\":[0-9][^,]*,\"t_call_s\":[0-9].*\"verified\":true")
kernel_test(spmv_min_time_funneled_1x2 NP 1 THREADS 2 COMMAND spmv --mode funneled --n 4 --iters 1 --min-time 1)
set_tests_properties(spmv_min_time_funneled_1x2 PROPERTIES PASS_REGULAR_EXPRESSION
  "\"iters\":([2-9]|[1-9][0-9]+),.*\"iters_requested\":1,.*\"verified\":true")
# default 0: exactly --iters, no calibration
kernel_test(spmv_min_time_off_1x1 NP 1 THREADS 1 COMMAND spmv --n 4 --iters 7)
set_tests_properties(spmv_min_time_off_1x1 PROPERTIES PASS_REGULAR_EXPRESSION
  "\"iters\":7,.*\"iters_requested\":7,\"min_time_s\":0,\"calib_calls\":0,\"calib_t_call_s\":0,.*\"verified\":true")
kernel_bad_min_time(spmv "" -0.5)
kernel_bad_min_time(spmv "_text" soon)
kernel_bad_min_time(spmv "_nan" nan)
# Fault-injection builds only: named faults (KERNEL_FAULT) that the first-call
# halo check let pass must fail: the halo exchanged on the first call only
# (caught by the untimed verification call on a NaN-poisoned ghost layer), and
# a face of rows read from the halo counted as interior (computed, in
# funneled, while the halo is still in flight).
if(KERNEL_FAULT_INJECT)
  named_fault(spmv_halo_once _2x1 NP 2 THREADS 1
              EXPECT_FAIL "\"verified\":false.*spmv: verification FAILED: max\\|y-yref\\|/max\\|yref\\| = inf"
              COMMAND spmv --n 6 --iters 3)
  named_fault(spmv_face_as_interior _2x1 NP 2 THREADS 1
              EXPECT_FAIL "spmv: verification FAILED: [1-9][0-9]* matrix entries of interior rows read a ghost value that a neighbour sends"
              COMMAND spmv --n 6 --iters 3)
  if(KERNEL_OPENMP)
    named_fault(spmv_halo_once _funneled_2x2 NP 2 THREADS 2
                EXPECT_FAIL "spmv: verification FAILED: max\\|y-yref\\|/max\\|yref\\| = inf"
                COMMAND spmv --mode funneled --n 6 --iters 3)
    named_fault(spmv_face_as_interior _funneled_2x2 NP 2 THREADS 2
                EXPECT_FAIL "spmv: verification FAILED: [1-9][0-9]* matrix entries of interior rows read a ghost value"
                COMMAND spmv --mode funneled --n 6 --iters 3)
  endif()
endif()
