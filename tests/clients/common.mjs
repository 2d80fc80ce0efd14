// Shared by the client programs: command-line parsing and the one JSON object each prints on stdout.
import { parseArgs } from 'node:util';

/**
 * Parse `--url URL --token TOKEN [--message TEXT] [--tool NAME]` (falling back to MCP_URL / MCP_TOKEN) plus any
 * extra string options with their defaults, e.g. `{ negotiation: 'auto' }`.
 */
export function options(extra = {}) {
    const spec = {
        url: { type: 'string', default: process.env.MCP_URL },
        token: { type: 'string', default: process.env.MCP_TOKEN },
        tool: { type: 'string', default: 'library_echo' },
        message: { type: 'string', default: 'hello from node' },
    };
    for (const [name, fallback] of Object.entries(extra)) spec[name] = { type: 'string', default: fallback };
    const { values } = parseArgs({ options: spec, strict: true });
    if (!values.url) throw new Error('--url (or MCP_URL) is required');
    if (!values.token) throw new Error('--token (or MCP_TOKEN) is required');
    return values;
}

/** Print one JSON object on stdout and exit: 0 on success, 1 when `error` is set. */
export function report(object) {
    process.stdout.write(JSON.stringify(object) + '\n');
    process.exit(object.error ? 1 : 0);
}

/** An error as plain JSON: its class, message and code (the SDKs' typed errors carry a code). */
export function describeError(error) {
    return { name: error?.constructor?.name ?? 'Error', message: String(error?.message ?? error), code: error?.code };
}

/** Run `main`, turning any failure into a JSON report with `error` set. */
export async function run(main) {
    try {
        report(await main());
    } catch (error) {
        report({ error: describeError(error) });
    }
}

/**
 * A fetch that records each exchange with the server: HTTP method, JSON-RPC method, the `MCP-Protocol-Version` and
 * `Mcp-Method` headers sent, whether a credential and a session id were sent, and the status. The programs print it
 * as `wire`, so the tests can see which era the client really spoke.
 */
export function recordingFetch(wire) {
    return async (input, init = {}) => {
        const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
        let rpc;
        if (typeof init.body === 'string') {
            try {
                const body = JSON.parse(init.body);
                rpc = Array.isArray(body) ? body.map((message) => message.method) : body.method;
            } catch {
                rpc = undefined;
            }
        }
        const entry = {
            http: init.method ?? 'GET',
            rpc,
            protocolVersion: headers.get('mcp-protocol-version'),
            mcpMethod: headers.get('mcp-method'),
            authorization: headers.has('authorization'),
            session: headers.has('mcp-session-id'),
        };
        const response = await fetch(input, init);
        wire.push({ ...entry, status: response.status });
        return response;
    };
}
