// Reference ids for diffattn's tokenizer tests: node ref.js FILE [tiktoken|o200k|gpt3] -> ids, whitespace-separated
// (tiktoken: its gpt2 encoding; o200k: its o200k_base, GPT-4o's; gpt3: gpt-3-encoder, GPT-2's files).
// With --time, prints the encode time (process start and file read excluded) to stderr.
const fs = require("fs");
const file = process.argv[2], which = process.argv[3] || "tiktoken", timing = process.argv.includes("--time");
const text = fs.readFileSync(file, "utf8");
let ids, t0, t1;
if (which === "tiktoken" || which === "o200k") {
  const { get_encoding } = require("tiktoken");
  const enc = get_encoding(which === "o200k" ? "o200k_base" : "gpt2");
  t0 = process.hrtime.bigint();
  ids = enc.encode(text, "all");
  t1 = process.hrtime.bigint();
  enc.free();
} else {
  const { encode } = require("gpt-3-encoder");
  t0 = process.hrtime.bigint();
  ids = encode(text);
  t1 = process.hrtime.bigint();
}
if (timing) {
  const s = Number(t1 - t0) / 1e9;
  process.stderr.write(`${which}: ${Buffer.byteLength(text)} bytes in ${s.toFixed(3)} s = ${(Buffer.byteLength(text) / s / 1e6).toFixed(2)} MB/s\n`);
}
const out = [];
for (let i = 0; i < ids.length; i++) out.push(ids[i]);
process.stdout.write(out.join(" ") + "\n");
