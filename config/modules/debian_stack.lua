-- An MPI stack of Debian's packages for the harness (config/modules/README.md);
-- files/openmpi.lua and files/mpich.lua are links to this file, the module's name says
-- which stack.  Puts mpicc, mpicxx, mpirun and mpiexec of the stack first on
-- PATH: links to Debian's suffixed tools (mpicc.openmpi, mpicc.mpich, ...),
-- since Debian's plain mpicc is whichever stack update-alternatives chose; or
-- <prefix>/bin of an install named by HARNESS_<STACK>_PREFIX.
local stacks = {
    openmpi = {title = "Open MPI", tools = {"mpicc.openmpi", "mpirun.openmpi"},
               apt = "openmpi-bin libopenmpi-dev"},
    mpich = {title = "MPICH", tools = {"mpicc.mpich", "mpiexec.mpich"},
             apt = "mpich libmpich-dev"},
}
local stack = myModuleName()
local spec = stacks[stack]
if spec == nil then
    LmodError(stack .. ": not a Debian stack of the harness (" .. myFileName() .. ")")
end
help(spec.title .. " for the harness: mpicc/mpirun/mpiexec of " .. spec.title ..
     " first on PATH")
whatis("Name: " .. stack .. " (harness)")
family("mpi")

local knob = "HARNESS_" .. stack:upper() .. "_PREFIX"
local root = myFileName():gsub("/files/[^/]+$", "")
local prefix = os.getenv(knob) or ""
local bin
if prefix ~= "" then
    bin = pathJoin(prefix, "bin")
else
    bin = pathJoin(root, "bin", stack)
    for _, tool in ipairs(spec.tools) do
        if not isFile(pathJoin("/usr/bin", tool)) then
            LmodError(stack .. ": /usr/bin/" .. tool .. " not found (apt-get install " ..
                      spec.apt .. ", or set " .. knob .. ")")
        end
    end
end
if not isFile(pathJoin(bin, "mpicc")) then
    LmodError(stack .. ": " .. bin .. "/mpicc not found")
end
prepend_path("PATH", bin)
setenv("HARNESS_MODULE_STACK", stack)
