// Loads a tokenizer.json with Hugging Face's pure-JS tokenizers and prints the
// ids of a file (no added special tokens around it):
//   node ref_hf.mjs tokenizer.json FILE
import fs from "fs";
import { Tokenizer } from "@huggingface/tokenizers";
const [, , tokPath, file] = process.argv;
const tok = new Tokenizer(JSON.parse(fs.readFileSync(tokPath, "utf8")), {});
const ids = tok.encode(fs.readFileSync(file, "utf8"), { add_special_tokens: false }).ids ?? tok.encode(fs.readFileSync(file, "utf8"), { add_special_tokens: false });
process.stdout.write(Array.from(ids).join(" ") + "\n");
