"""LFM2-VL image tokens from transformers 5.24's own code: the arithmetic functions of Lfm2VlImageProcessor and
Lfm2VlProcessor, taken from their source files by name (their modules need torchvision, which has no build for this
CPU torch) and run on image sizes alone, at LFM2.5-VL-1.6B's settings (the processor's defaults).

Dev-only (needs transformers). Usage: python validation/lfm2_image_tokens.py
Output (transformers 5.24), which tests/test_vision.py expects of pycore/model/vision.py:
    (1280, 720) grid 1 2 resized (384, 672) tokens 769
    (512, 512) grid 1 1 resized (512, 512) tokens 258
    (256, 256) grid 1 1 resized (256, 256) tokens 66
    (2000, 3000) grid 3 2 resized (608, 416) tokens 1792
    (100, 100) grid 1 1 resized (256, 256) tokens 66
    (1024, 1024) grid 2 2 resized (512, 512) tokens 1287
    (3840, 2160) grid 2 4 resized (384, 672) tokens 2311
    (700, 500) grid 1 1 resized (416, 576) tokens 236
"""
import ast
import math
import re
import types
from functools import lru_cache

import transformers.models.lfm2_vl as pkg

base = pkg.__path__[0]
ns = {"math": math, "lru_cache": lru_cache}
def take(path, names):
    tree = ast.parse(open(f"{base}/{path}").read())
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in names:
            node.decorator_list = []
            node.returns = None
            for argument in node.args.args + node.args.kwonlyargs:
                argument.annotation = None
            found[node.name] = node
    mod = ast.Module(body=list(found.values()), type_ignores=[])
    exec(compile(ast.fix_missing_locations(mod), path, "exec"), ns)
take("image_processing_lfm2_vl.py", {"round_by_factor", "find_closest_aspect_ratio", "_target_ratios",
     "_get_grid_layout", "smart_resize", "_is_image_too_large"})
take("processing_lfm2_vl.py", {"_build_image_tokens", "_compute_tokens_per_tile", "_compute_tokens_for_image"})
ip = types.SimpleNamespace()
ip._target_ratios = lambda a, b: ns["_target_ratios"](ip, a, b)
proc = types.SimpleNamespace(image_start_token="S", image_end_token="E", image_thumbnail_token="T", image_token="I")
for w, h in [(1280,720),(512,512),(256,256),(2000,3000),(100,100),(1024,1024),(3840,2160),(700,500)]:
    large = ns["_is_image_too_large"](ip, h, w, 256, 16, 2, 2.0)
    nw, nh = ns["smart_resize"](ip, h, w, 2, 64, 256, 16)
    gw, gh = ns["_get_grid_layout"](ip, h, w, 2, 10, 512)[:2] if large else (1, 1)
    tpt = ns["_compute_tokens_per_tile"](proc, 512, 16, 2)
    tfi = ns["_compute_tokens_for_image"](proc, [nh, nw], 16, 2)
    s = ns["_build_image_tokens"](proc, gh, gw, tpt, tfi, True, True)
    pattern = r"<\|img_row_\d+_col_\d+\|>"
    print((w, h), "grid", gh, gw, "resized", (nh, nw), "tokens", len(re.findall(pattern, s)) + len(re.sub(pattern, "", s)))
