// The TypeScript SDK v1 (@modelcontextprotocol/sdk, 2025-11-25, initialize handshake) against a server:
// lists the tools and calls one, with the token as `Authorization: Bearer`.
//   node sdk-v1.mjs --url URL --token TOKEN [--tool library_echo] [--message TEXT]
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { options, recordingFetch, run } from './common.mjs';

const args = options();

await run(async () => {
    const wire = [];
    const transport = new StreamableHTTPClientTransport(new URL(args.url), {
        requestInit: { headers: { Authorization: `Bearer ${args.token}` } },
        fetch: recordingFetch(wire),
    });
    const client = new Client({ name: 'mcp-expose-tests-sdk-v1', version: '1.0.0' });
    await client.connect(transport);
    try {
        const tools = await client.listTools();
        const result = await client.callTool({ name: args.tool, arguments: { message: args.message } });
        return {
            client: 'sdk-v1',
            protocolVersion: transport.protocolVersion,
            server: client.getServerVersion(),
            tools: tools.tools.map((tool) => tool.name),
            result,
            wire,
        };
    } finally {
        await client.close();
    }
});
