# cmake -DLAUNCHER=.. -DNPFLAG=.. -DPRE=.. -DEXE=.. -P md_layouts.cmake
# (EXE: md's file, then the launcher's flags that follow the program, if any)
# Runs md on the same small system as 1x1 (mpi), 2x1 (mpi) and 1x2 (masteronly),
# with half lists, and 1x2 with full lists, and checks that the step-0 pe_0 and virial_0 (printed with %.17g) agree with
# the 1x1 values to 1e-12 relative.
set(args --cells-per-side 6 --steps 10)
set(ref_pe "")
set(ref_vir "")
foreach(layout 1:1:mpi:half 2:1:mpi:half 1:2:masteronly:half 1:2:masteronly:full)
  string(REPLACE ":" ";" parts "${layout}")
  list(GET parts 0 np)
  list(GET parts 1 nt)
  list(GET parts 2 mode)
  list(GET parts 3 lists)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env OMP_NUM_THREADS=${nt}
            ${LAUNCHER} ${NPFLAG} ${np} ${PRE} ${EXE} --mode ${mode} --list ${lists} ${args}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "md ${np}x${nt} ${mode} ${lists} failed (${rc}):\n${out}${err}")
  endif()
  if(NOT out MATCHES "pe_0 = ([-+0-9.eE]+) virial_0 = ([-+0-9.eE]+)")
    message(FATAL_ERROR "md ${np}x${nt} ${mode} ${lists}: no 'pe_0 = .. virial_0 = ..' line:\n${out}${err}")
  endif()
  set(pe "${CMAKE_MATCH_1}")
  set(vir "${CMAKE_MATCH_2}")
  message(STATUS "${np}x${nt} ${mode} ${lists}: pe_0 = ${pe}, virial_0 = ${vir}")
  if(ref_pe STREQUAL "")
    set(ref_pe "${pe}")
    set(ref_vir "${vir}")
    continue()
  endif()
  # CMake has no floating-point arithmetic: let awk compute the relative difference.
  foreach(triple "pe_0:${ref_pe}:${pe}" "virial_0:${ref_vir}:${vir}")
    string(REPLACE ":" ";" t "${triple}")
    list(GET t 0 name)
    list(GET t 1 a)
    list(GET t 2 b)
    execute_process(
      COMMAND awk -v a=${a} -v b=${b}
              "BEGIN { d = a - b; if (d < 0) d = -d; s = a < 0 ? -a : a; if (s == 0) s = 1; r = d / s; printf \"%.3e\", r; exit (r <= 1e-12 ? 0 : 1) }"
      RESULT_VARIABLE cmp OUTPUT_VARIABLE rel)
    if(NOT cmp EQUAL 0)
      message(FATAL_ERROR "${name} differs: ${a} (1x1) vs ${b} (${np}x${nt} ${mode} ${lists}), relative ${rel} > 1e-12")
    endif()
    message(STATUS "  ${name} relative difference from 1x1: ${rel}")
  endforeach()
endforeach()
