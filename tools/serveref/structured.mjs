// Structured output through OpenAI's own client library (the pinned `openai`
// package): for each schema of SCHEMAS.json, N0 chat requests with
// response_format json_schema at temperature 0 and N at temperature 1 (seeds
// 1..N), N0 and N completions with response_format json_object, then the speed of
// the same chat request with and without the constraint. Prints one JSON
// line: {answers: [{kind, schema, temperature, content, finish, tokens}],
// speed: {constrained, free}} (tokens per second of generation, each the best
// of 3 requests of max_tokens tokens). The check is tests/cli_serve_json.sh's.
// At temperature 0 the seed does not matter: N0 (default N) repeats of one
// request, whose answers the check expects identical.
//   node structured.mjs BASE_URL SCHEMAS.json N MAX_TOKENS [N0]
import fs from "fs";
import OpenAI from "openai";
const [, , baseURL, schemaFile, nArg, maxArg, n0Arg] = process.argv;
const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0, timeout: 120000 });
const schemas = JSON.parse(fs.readFileSync(schemaFile, "utf8"));
const N = Number(nArg), max_tokens = Number(maxArg), N0 = Number(n0Arg ?? nArg);
const count = (temperature) => (temperature === 0 ? N0 : N);
const model = (await client.models.list()).data[0].id;
const answers = [];
const messages = [{ role: "user", content: "Answer in JSON." }];
for (let s = 0; s < schemas.length; s++)
  for (const temperature of [0, 1])
    for (let i = 1; i <= count(temperature); i++) {
      const r = await client.chat.completions.create({
        model, messages, temperature, seed: i, max_tokens,
        response_format: { type: "json_schema", json_schema: { name: `s${s}`, strict: true, schema: schemas[s] } },
      });
      answers.push({ kind: "json_schema", schema: s, temperature, content: r.choices[0].message.content,
        finish: r.choices[0].finish_reason, tokens: r.usage.completion_tokens });
    }
for (const temperature of [0, 1])
  for (let i = 1; i <= count(temperature); i++) {
    const r = await client.completions.create({ model, prompt: "JSON:", temperature, seed: i, max_tokens,
      response_format: { type: "json_object" } });
    answers.push({ kind: "json_object", temperature, content: r.choices[0].text, finish: r.choices[0].finish_reason,
      tokens: r.usage.completion_tokens });
  }
/* speed: one free string, which the budget closes at max_tokens, keeps the constrained request generating as
 * long as the free one */
const long = { type: "object", properties: { text: { type: "string" } }, required: ["text"], additionalProperties: false };
const rate = async (format) => {
  let best = 0;
  for (let k = 0; k < 3; k++) {
    const t0 = performance.now();
    const r = await client.chat.completions.create({ model, messages, temperature: 1, seed: k, max_tokens,
      ignore_eos: true, ...(format ? { response_format: format } : {}) });
    const tps = r.usage.completion_tokens / ((performance.now() - t0) / 1000);
    best = Math.max(best, tps);
  }
  return best;
};
const speed = { free: await rate(null),
  constrained: await rate({ type: "json_schema", json_schema: { name: "long", schema: long } }) };
process.stdout.write(JSON.stringify({ answers, speed }) + "\n");
