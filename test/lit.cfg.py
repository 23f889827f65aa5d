# lit configuration for colossal-compile's IR and driver tests.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "colossal"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.join(config.colossal_src_root, "test", "lit")
config.test_exec_root = os.path.join(config.colossal_obj_root, "test", "lit")
config.excludes = ["Inputs"]

config.substitutions.append(("%fixtures", os.path.join(config.colossal_src_root, "test", "fixtures")))
config.substitutions.append(("%inputs", os.path.join(config.colossal_src_root, "test", "lit", "Inputs")))

llvm_config.with_system_environment(["HOME", "TMP", "TEMP", "ASAN_OPTIONS", "UBSAN_OPTIONS"])
llvm_config.use_default_substitutions()

tool_dirs = [
    os.path.join(config.colossal_tools_dir, "colossal-opt"),
    os.path.join(config.colossal_tools_dir, "colossal-compile"),
    os.path.join(config.colossal_tools_dir, "colossal-cost"),
    os.path.join(config.colossal_tools_dir, "colossal-model"),
    config.llvm_tools_dir,
]
llvm_config.add_tool_substitutions(["colossal-opt", "colossal-compile", "colossal-cost", "colossal-model", "FileCheck", "not", "count"], tool_dirs)
