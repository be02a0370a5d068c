# STAND-IN: vllm/utils/import_utils.py of vLLM (vllm-fleet proving ground): how a parser plugin
# (--tool-parser-plugin, --reasoning-parser-plugin) is imported. vLLM 0.17.1 imports it as a file
# (import_from_path); 0.33 and 0.34 as a module first, else as a file (import_plugin). A failure is
# logged, not raised, as in vLLM: the names the plugin would register are then refused.
import importlib
import importlib.util
import os
import sys

from vllm.logger import init_logger

logger = init_logger(__name__)


def import_from_path(module_name: str, file_path: str):
    spec = importlib.util.spec_from_file_location(module_name, file_path)
    if spec is None:
        raise ModuleNotFoundError(f"No module named {module_name!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def import_parser_plugin(plugin_path: str):
    from vllm.version import LAYOUT

    if LAYOUT != "0.17.1":
        try:
            return importlib.import_module(plugin_path)
        except ModuleNotFoundError:
            pass
    module_name = os.path.splitext(os.path.basename(plugin_path))[0]
    try:
        return import_from_path(module_name, plugin_path)
    except Exception as e:  # noqa: BLE001
        logger.error("Failed to load module '%s' from %s.", module_name, plugin_path, line=96)
        logger.error("%s: %s", type(e).__name__, e, line=96)
        return None
