#!/usr/bin/env bash
# The README's commands as a newcomer runs them: a fresh virtual environment,
# a non-editable install, from the root of the checkout (where the source
# folder must not shadow the installed package).
#
#   bash tools/fresh_venv_check.sh PYTHON [PYTEST ARGS...]
#
# PYTHON makes the environment (python3.12, say: this is how the Python
# versions that CI does not run are checked). Without PYTEST ARGS the whole
# suite runs against the installed package.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python_exe="${1:?usage: fresh_venv_check.sh PYTHON [PYTEST ARGS...]}"
shift
venv="$(mktemp -d)/venv"
trap 'rm -rf "$(dirname "$venv")"' EXIT
"$python_exe" -m venv "$venv"
# shellcheck disable=SC1091
source "$venv/bin/activate"
python --version
pip install -q --upgrade pip
echo "--- pip install . && python -m onnx_light_cpu run"
pip install -q . && python -m onnx_light_cpu run
echo "--- the suite against the installed package"
# the test extra's requirements alone: ".[test]" would build the package again
python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))
           ["project"]["optional-dependencies"]["test"]))' >"$(dirname "$venv")/test.txt"
pip install -q -r "$(dirname "$venv")/test.txt"
python -c "import onnx_light_cpu, sys; assert 'site-packages' in onnx_light_cpu.__file__, onnx_light_cpu.__file__"
python -m pytest -q -p no:cacheprovider "$@"
