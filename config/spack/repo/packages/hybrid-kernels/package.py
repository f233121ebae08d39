# Spack package of the harness's kernels (src/ of this checkout).
#
# The environment at the top of the checkout (spack.yaml) builds it from the
# checkout itself with a `develop` entry, so the version is `develop` and no
# tarball is ever fetched.

from spack.package import *


class HybridKernels(CMakePackage):
    """MPI+OpenMP kernels of the hybrid regression harness: spmv (27-point
    stencil SpMV), md (Lennard-Jones molecular dynamics), ring (ring,
    ping-pong and bandwidth) and stream (STREAM triad)."""

    # No download location: the harness's spack.yaml builds it from this
    # checkout with `develop: {hybrid-kernels: {path: src, spec: ...@=develop}}`.
    license("BSD-3-Clause")

    version("develop")

    variant("openmp", default=True, description="Build the kernels with OpenMP (hybrid modes)")
    variant(
        "fault_inject",
        default=False,
        description="Corrupt one result value in every kernel (the harness's tests only)",
    )
    variant(
        "fault_slow",
        default="0",
        values=lambda v: v.isdigit(),
        description="ring bw: busy-wait this percent of every timed window (tests only; 0: off)",
    )
    # CMakePackage's build_type variant, with the harness's default.
    variant(
        "build_type",
        default="Release",
        description="CMake build type",
        values=("Debug", "Release", "RelWithDebInfo", "MinSizeRel"),
    )

    depends_on("cmake@3.18:", type="build")
    depends_on("mpi")

    def cmake_args(self):
        mpi = self.spec["mpi"]
        return [
            # The stack's own wrapper: never a compiler wrapper found on PATH.
            self.define("MPI_C_COMPILER", mpi.mpicc),
            self.define_from_variant("KERNEL_OPENMP", "openmp"),
            self.define_from_variant("KERNEL_FAULT_INJECT", "fault_inject"),
            self.define_from_variant("KERNEL_FAULT_SLOW", "fault_slow"),
            # The spec's target says the CPU (Spack's compiler wrapper adds its
            # -march=): Release's -march=native, after it, built for the CPU of
            # the node that builds (a login node of another CPU than the target).
            self.define("KERNEL_NATIVE", False),
        ]
