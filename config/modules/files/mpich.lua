-- MPICH for the harness (config/modules/README.md).
-- Puts mpicc, mpicxx, mpirun and mpiexec of MPICH first on PATH: links to
-- Debian's suffixed tools (mpicc.mpich, ...), since Debian's plain mpicc is
-- whichever stack update-alternatives chose; or <prefix>/bin of an install
-- named by HARNESS_MPICH_PREFIX.
help([[MPICH for the harness: mpicc/mpirun/mpiexec of MPICH first on PATH]])
whatis("Name: mpich (harness)")
family("mpi")

local stack = "mpich"
local root = myFileName():gsub("/files/[^/]+$", "")
local prefix = os.getenv("HARNESS_MPICH_PREFIX") or ""
local bin
if prefix ~= "" then
    bin = pathJoin(prefix, "bin")
else
    bin = pathJoin(root, "bin", stack)
    for _, tool in ipairs({"mpicc.mpich", "mpiexec.mpich"}) do
        if not isFile(pathJoin("/usr/bin", tool)) then
            LmodError("mpich: /usr/bin/" .. tool ..
                      " not found (apt-get install mpich libmpich-dev," ..
                      " or set HARNESS_MPICH_PREFIX)")
        end
    end
end
if not isFile(pathJoin(bin, "mpicc")) then
    LmodError("mpich: " .. bin .. "/mpicc not found")
end
prepend_path("PATH", bin)
setenv("HARNESS_MODULE_STACK", stack)
