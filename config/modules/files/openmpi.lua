-- Open MPI for the harness (config/modules/README.md).
-- Puts mpicc, mpicxx, mpirun and mpiexec of Open MPI first on PATH: links to
-- Debian's suffixed tools (mpicc.openmpi, ...), since Debian's plain mpicc is
-- whichever stack update-alternatives chose; or <prefix>/bin of an install
-- named by HARNESS_OPENMPI_PREFIX.
help([[Open MPI for the harness: mpicc/mpirun/mpiexec of Open MPI first on PATH]])
whatis("Name: openmpi (harness)")
family("mpi")

local stack = "openmpi"
local root = myFileName():gsub("/files/[^/]+$", "")
local prefix = os.getenv("HARNESS_OPENMPI_PREFIX") or ""
local bin
if prefix ~= "" then
    bin = pathJoin(prefix, "bin")
else
    bin = pathJoin(root, "bin", stack)
    for _, tool in ipairs({"mpicc.openmpi", "mpirun.openmpi"}) do
        if not isFile(pathJoin("/usr/bin", tool)) then
            LmodError("openmpi: /usr/bin/" .. tool ..
                      " not found (apt-get install openmpi-bin libopenmpi-dev," ..
                      " or set HARNESS_OPENMPI_PREFIX)")
        end
    end
end
if not isFile(pathJoin(bin, "mpicc")) then
    LmodError("openmpi: " .. bin .. "/mpicc not found")
end
prepend_path("PATH", bin)
setenv("HARNESS_MODULE_STACK", stack)
