// Parses a GGUF with @huggingface/gguf (a reader diffattn did not write) and
// prints what it found as one JSON line: the metadata diffattn writes, every
// tensor's ggml type and shape, and the offsets the reader computed.
// usage: node check.mjs FILE.gguf
import { gguf, GGMLQuantizationType } from "@huggingface/gguf";
import { resolve } from "node:path";

const file = process.argv[2];
if (!file) {
  console.error("usage: node check.mjs FILE.gguf");
  process.exit(2);
}
const { metadata, tensorInfos, tensorDataOffset } = await gguf(resolve(file), { allowLocalFile: true });
const types = {};
for (const t of tensorInfos) {
  const name = GGMLQuantizationType[t.dtype] ?? String(t.dtype);
  types[name] = (types[name] ?? 0) + 1;
}
const tokens = metadata["tokenizer.ggml.tokens"];
const tokenizer =
  metadata["tokenizer.ggml.model"] === undefined
    ? null
    : {
        model: metadata["tokenizer.ggml.model"],
        pre: metadata["tokenizer.ggml.pre"],
        tokens: tokens?.length,
        token_type: metadata["tokenizer.ggml.token_type"]?.length,
        merges: metadata["tokenizer.ggml.merges"]?.length,
        first_merge: metadata["tokenizer.ggml.merges"]?.[0],
        bos: metadata["tokenizer.ggml.bos_token_id"],
        add_bos: metadata["tokenizer.ggml.add_bos_token"],
        eos: metadata["tokenizer.ggml.eos_token_id"],
        eos_text: tokens?.[metadata["tokenizer.ggml.eos_token_id"]],
        hf_json: typeof metadata["tokenizer.huggingface.json"],
      };
const q = tensorInfos.find((t) => t.name === "blk.0.attn_q.weight" || t.name === "layers.0.attn.q_proj.weight");
const arch = metadata["general.architecture"];
console.log(
  JSON.stringify({
    version: metadata.version,
    architecture: arch,
    alignment: metadata["general.alignment"],
    block_count: metadata[`${arch}.block_count`],
    embedding_length: metadata[`${arch}.embedding_length`],
    head_count: metadata[`${arch}.attention.head_count`],
    tensor_count: Number(metadata.tensor_count),
    tensors: tensorInfos.length,
    types,
    q_proj: q ? { shape: q.shape.map(Number), type: GGMLQuantizationType[q.dtype], offset: Number(q.offset) } : null,
    data_offset: Number(tensorDataOffset),
    tokenizer,
  }),
);
