// The TypeScript SDK v2 (@modelcontextprotocol/client) against a server: negotiates the protocol version
// (`--negotiation auto`, `legacy`, or a revision to pin, e.g. `2026-07-28`), lists the tools and calls one, with the
// token given to the transport's `authProvider` (sent as `Authorization: Bearer`).
//   node sdk-v2.mjs --url URL --token TOKEN --negotiation auto|legacy|2026-07-28 [--tool library_echo] [--message TEXT]
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { options, recordingFetch, run } from './common.mjs';

const args = options({ negotiation: 'auto' });
const mode = ['auto', 'legacy'].includes(args.negotiation) ? args.negotiation : { pin: args.negotiation };

await run(async () => {
    const wire = [];
    const transport = new StreamableHTTPClientTransport(new URL(args.url), {
        authProvider: { token: async () => args.token },
        fetch: recordingFetch(wire),
    });
    const client = new Client(
        { name: 'mcp-expose-tests-sdk-v2', version: '1.0.0' },
        { versionNegotiation: { mode } },
    );
    await client.connect(transport);
    try {
        const tools = await client.listTools();
        const result = await client.callTool({ name: args.tool, arguments: { message: args.message } });
        return {
            client: 'sdk-v2',
            negotiation: mode,
            protocolVersion: client.getNegotiatedProtocolVersion(),
            era: client.getProtocolEra(),
            server: client.getServerVersion(),
            tools: tools.tools.map((tool) => tool.name),
            result,
            wire,
        };
    } finally {
        await client.close();
    }
});
