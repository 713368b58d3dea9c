// The TypeScript SDK's MCP client against `memext serve`: connect over streamable HTTP with a bearer token, list the
// tools, save a memory and search it. Prints one JSON line: {"tools": [...], "search": <search_memory's result>}.
// Usage: node client.mjs URL TOKEN USER_ID QUERY
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, userId, query] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "memory-ext-ts-test", version: "1.0.0" });
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name);
const saved = await client.callTool({ name: "save_memory", arguments: { user_id: userId, content: "Ana's cello is a 1920s Mirecourt." } });
if (saved.isError) throw new Error(`save_memory failed: ${JSON.stringify(saved.content)}`);
const found = await client.callTool({ name: "search_memory", arguments: { user_id: userId, query, k: 3 } });
console.log(JSON.stringify({ tools, isError: found.isError ?? false, search: found.structuredContent ?? found.content }));
await client.close();
