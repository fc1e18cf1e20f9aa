// Loads a tokenizer.json with Hugging Face's pure-JS tokenizers and prints the
// ids of a file, whitespace-separated:
//   node ref_hf.mjs tokenizer.json FILE [--add-special-tokens] [--time]
// Without --add-special-tokens nothing is added around the text's ids
// (add_special_tokens: false); with it, what the post_processor adds (the
// library's default). --time prints the encode time to stderr (loading the
// tokenizer and reading the file excluded).
import fs from "fs";
import { Tokenizer } from "@huggingface/tokenizers";
const [, , tokPath, file, ...flags] = process.argv;
const add_special_tokens = flags.includes("--add-special-tokens");
const tok = new Tokenizer(JSON.parse(fs.readFileSync(tokPath, "utf8")), {});
const text = fs.readFileSync(file, "utf8");
const t0 = process.hrtime.bigint();
const enc = tok.encode(text, { add_special_tokens });
const t1 = process.hrtime.bigint();
const ids = enc.ids ?? enc;
if (flags.includes("--time")) {
  const s = Number(t1 - t0) / 1e9, bytes = Buffer.byteLength(text);
  process.stderr.write(`${bytes} bytes -> ${ids.length} ids in ${s.toFixed(3)} s = ${(bytes / s / 1e6).toFixed(2)} MB/s\n`);
}
process.stdout.write(Array.from(ids).join(" ") + "\n");
