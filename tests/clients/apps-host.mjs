// A minimal MCP Apps host for the browser tests, on the official ext-apps AppBridge: it shows a ui:// page in a
// sandboxed iframe, answers the page's handshake, sends it the tool's input and result, and forwards the page's
// tools/call to window.hostCallTool (the test's route to the live server). Bundled by esbuild for the browser.
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

window.startHost = async function startHost({ html, toolInput, toolResult, appTools }) {
  const iframe = document.createElement("iframe");
  iframe.id = "app";
  iframe.setAttribute("sandbox", "allow-scripts"); // no allow-same-origin: the page gets an opaque origin
  iframe.style.cssText = "width: 480px; height: 360px; border: 1px solid #ccc";
  document.body.appendChild(iframe);
  const bridge = new AppBridge(null, { name: "mcp-expose-test-host", version: "1.0.0" }, { serverTools: {} });
  window.hostCalls = [];
  bridge.oncalltool = async (params) => {
    window.hostCalls.push(params.name);
    if (!appTools.includes(params.name)) {
      // As a host must: only tools whose _meta.ui.visibility includes "app" may be called from the page.
      throw new Error(`${params.name} is not visible to apps`);
    }
    return await window.hostCallTool(params.name, params.arguments || {});
  };
  const initialized = new Promise((resolve) => (bridge.oninitialized = resolve));
  // Listen before the page loads: its ui/initialize is the first thing its bridge sends. (The frame's window
  // stays the same object when srcdoc navigates it.)
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  iframe.srcdoc = html;
  await initialized;
  await bridge.sendToolInput({ arguments: toolInput });
  await bridge.sendToolResult(toolResult);
  window.hostReady = true;
};
