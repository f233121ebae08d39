-- MVAPICH2 for the harness (config/modules/README.md): <prefix>/bin of the
-- install named by HARNESS_MVAPICH2_PREFIX first on PATH (its mpicc, mpicxx,
-- mpirun and mpiexec carry no suffix there).  No registry here has MVAPICH2;
-- without the prefix the module refuses to load, naming the variable.
help([[MVAPICH2 for the harness: <HARNESS_MVAPICH2_PREFIX>/bin first on PATH]])
whatis("Name: mvapich2 (harness)")
family("mpi")

local prefix = os.getenv("HARNESS_MVAPICH2_PREFIX") or ""
if prefix == "" then
    LmodError("mvapich2: set HARNESS_MVAPICH2_PREFIX to the install prefix of MVAPICH2")
end
local bin = pathJoin(prefix, "bin")
for _, tool in ipairs({"mpicc", "mpiexec"}) do
    if not isFile(pathJoin(bin, tool)) then
        LmodError("mvapich2: " .. pathJoin(bin, tool) ..
                  " not found (HARNESS_MVAPICH2_PREFIX=" .. prefix .. ")")
    end
end
prepend_path("PATH", bin)
-- its libraries: <prefix>/lib, and <prefix>/lib64 where it installed there
prepend_path("LD_LIBRARY_PATH", pathJoin(prefix, "lib"))
if isDir(pathJoin(prefix, "lib64")) then
    prepend_path("LD_LIBRARY_PATH", pathJoin(prefix, "lib64"))
end
setenv("HARNESS_MODULE_STACK", "mvapich2")
