#!/usr/bin/env bash
# general.name / version / organization / finetune / basename / size_label
# derived from config.json's _name_or_path as gguf-py's metadata.py derives
# them, for the model ids of fixtures/hf/names.json (written by
# fixtures/hf/gen_fixtures.py with gguf-py itself).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init hf-names "$1" "$2"
need_plugin hf "scheme hf "
$py - "$amn" "$src/fixtures/hf" "$work" <<'PY'
import json, os, shutil, subprocess, sys
amn, fixtures, work = sys.argv[1:4]
spec = json.load(open(os.path.join(fixtures, "names.json")))
keys = ["general.name", "general.version", "general.organization", "general.finetune",
        "general.basename", "general.size_label"]
fails = 0
for i, case in enumerate(spec["cases"]):
    d = os.path.join(work, str(i), "checkpoint")
    shutil.copytree(os.path.join(fixtures, spec["base"]), d)
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg["_name_or_path"] = case["id"]
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    out = os.path.join(work, f"{i}.gguf")
    r = subprocess.run([amn, "convert", d, "--to", "gguf", "--out-dtype", "f32", "-o", out,
                        "--quiet"], capture_output=True, text=True)
    if r.returncode:
        print(f"FAIL: {case['id']}: amn failed: {r.stderr.strip()}")
        fails += 1
        continue
    kv = json.loads(subprocess.run([amn, "inspect", "--json", out], capture_output=True,
                                   text=True, check=True).stdout)["kv"]
    got = {k: kv[k] for k in keys if k in kv}
    if got != case["kv"]:
        print(f"FAIL: {case['id']}: {got} != the converter's {case['kv']}")
        fails += 1
print(f"hf_names: {len(spec['cases']) - fails} passed, {fails} failed")
sys.exit(1 if fails or not spec["cases"] else 0)
PY
