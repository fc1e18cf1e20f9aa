// Drives a diffattn server with OpenAI's own client library (the pinned
// `openai` package) and prints what it got as one JSON line:
//   node client.mjs BASE_URL API_KEY
// models.list, a greedy completion, a streamed chat (its chunks counted), and
// the client's own error class for an unknown model.
import OpenAI from "openai";
const [, , baseURL, apiKey] = process.argv;
const client = new OpenAI({ baseURL, apiKey: apiKey || "none", maxRetries: 0, timeout: 60000 });
const out = {};
const models = await client.models.list();
out.models = models.data.map((m) => m.id);
const model = out.models[0];
const c = await client.completions.create({ model, prompt: "Hello", max_tokens: 8, temperature: 0 });
out.completion = { text: c.choices[0].text, finish: c.choices[0].finish_reason, usage: c.usage };
const stream = await client.chat.completions.create({
  model,
  messages: [{ role: "user", content: "Say hi" }],
  max_tokens: 12,
  temperature: 0,
  stream: true,
});
let text = "", chunks = 0, finish = null;
for await (const ch of stream) {
  chunks++;
  text += ch.choices[0]?.delta?.content ?? "";
  finish = ch.choices[0]?.finish_reason ?? finish;
}
out.chat = { text, chunks, finish };
const whole = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Say hi" }], max_tokens: 12, temperature: 0 });
out.chat_whole = whole.choices[0].message.content;
try {
  await client.completions.create({ model: "no-such-model", prompt: "x", max_tokens: 1 });
  out.unknown_model = "answered";
} catch (e) {
  out.unknown_model = { status: e.status, isNotFound: e instanceof OpenAI.NotFoundError, code: e.code ?? null };
}
process.stdout.write(JSON.stringify(out) + "\n");
