# Environment for the whole test suite; it must be set before anything imports triton or the HF libraries.
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # the Triton kernel runs on the CPU interpreter in CI
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
