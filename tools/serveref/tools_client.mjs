// Tool calls through OpenAI's own client library (the pinned `openai`
// package): N chat requests with tool_choice "required" and N naming each
// tool, at temperature 0 and 1 (seeds 1..N); the same streamed (S of each),
// their deltas put back together, and the count of chunks that carried
// arguments; and a second turn that sends the call and
// the tool's answer back. Prints one JSON line: {calls: [{choice, temperature,
// stream, finish, id, name, arguments}], streamed_same: [true|false, ...],
// arg_chunks: [chunks with arguments, per streamed call],
// second_turn: {finish, status}}. The checks are tests/cli_serve_tools.sh's.
//   node tools_client.mjs BASE_URL TOOLS.json N S MAX_TOKENS
import fs from "fs";
import OpenAI from "openai";
const [, , baseURL, toolsFile, nArg, sArg, maxArg] = process.argv;
const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0, timeout: 120000 });
const tools = JSON.parse(fs.readFileSync(toolsFile, "utf8"));
const N = Number(nArg), S = Number(sArg), max_tokens = Number(maxArg);
const model = (await client.models.list()).data[0].id;
const messages = [{ role: "system", content: "You call tools." }, { role: "user", content: "What is the weather in Paris?" }];
const choices = ["required", ...tools.map((t) => ({ type: "function", function: { name: t.function.name } }))];
const label = (c) => (typeof c === "string" ? c : c.function.name);
const calls = [], streamed_same = [], arg_chunks = [];
const record = (choice, temperature, stream, finish, tc) =>
  calls.push({ choice: label(choice), temperature, stream, finish, id: tc?.id ?? null,
    name: tc?.function?.name ?? null, arguments: tc?.function?.arguments ?? null, n_calls: tc ? 1 : 0 });
let first = null;
for (const tool_choice of choices)
  for (const temperature of [0, 1])
    for (let i = 1; i <= N; i++) {
      const body = { model, messages, tools, tool_choice, temperature, seed: i, max_tokens };
      const r = await client.chat.completions.create(body);
      const m = r.choices[0].message;
      record(tool_choice, temperature, false, r.choices[0].finish_reason, m.tool_calls?.[0]);
      if ((m.tool_calls?.length ?? 0) !== 1) calls[calls.length - 1].n_calls = m.tool_calls?.length ?? 0;
      first ??= m;
      if (i > S) continue;
      const parts = {};
      let finish = null, with_args = 0;
      for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
        const ch = chunk.choices[0];
        if (ch.finish_reason) finish = ch.finish_reason;
        with_args += (ch.delta?.tool_calls ?? []).some((d) => d.function?.arguments);
        for (const d of ch.delta?.tool_calls ?? []) {
          const p = (parts[d.index] ??= { id: null, name: "", arguments: "" });
          if (d.id) p.id = d.id;
          if (d.function?.name) p.name += d.function.name;
          if (d.function?.arguments) p.arguments += d.function.arguments;
        }
      }
      const got = Object.values(parts);
      record(tool_choice, temperature, true, finish, got[0] && { id: got[0].id, function: got[0] });
      const whole = m.tool_calls?.[0]?.function;
      arg_chunks.push(with_args);
      streamed_same.push(got.length === 1 && !!whole && got[0].name === whole.name && got[0].arguments === whole.arguments);
    }
// the second turn: the assistant's call and the tool's answer go back
const turn2 = [...messages, first, { role: "tool", tool_call_id: first.tool_calls[0].id, content: "{\"temp\": 21}" }];
const r2 = await client.chat.completions.create({ model, messages: turn2, tools, max_tokens: 8, temperature: 0 });
process.stdout.write(JSON.stringify({ calls, streamed_same, arg_chunks,
  second_turn: { finish: r2.choices[0].finish_reason, prompt_tokens: r2.usage.prompt_tokens } }) + "\n");
