/*
 * django-mcp-expose: the MCP Apps bridge for a page the host shows in its sandboxed iframe.
 * Included inline by {% mcp_app_bridge %}. It speaks the ext-apps protocol (JSON-RPC over postMessage with
 * the host window): `ui/initialize` then `ui/notifications/initialized`, and hands the page the tool's
 * input and result as they arrive. See docs/apps.md for the API:
 *
 *   mcpApp.on("result", (result, data) => ...)   // CallToolResult, and its structuredContent
 *   mcpApp.on("input", (args) => ...)            // the call's arguments
 *   mcpApp.callTool(name, args)                  // through the host; our server's policy decides
 *   <span data-mcp-text="title"></span>          // filled from structuredContent.title on each result
 *   <html data-mcp-state="loading|ready|error|cancelled">
 */
(function () {
  "use strict";
  if (window.mcpApp) return;
  var PROTOCOL_VERSION = "2026-01-26";
  var host = window.parent;
  var nextId = 1;
  var pending = {};
  var listeners = { input: [], result: [], cancelled: [], context: [], teardown: [] };
  var latest = { input: undefined, result: undefined };

  function post(message) {
    message.jsonrpc = "2.0";
    host.postMessage(message, "*"); // the sandboxed host's origin is opaque to us; the host checks ours
  }

  function request(method, params) {
    var id = nextId++;
    return new Promise(function (resolve, reject) {
      pending[id] = { resolve: resolve, reject: reject };
      post({ id: id, method: method, params: params || {} });
    });
  }

  function notify(method, params) {
    post({ method: method, params: params || {} });
  }

  function call(event, listener, args) {
    try {
      listener.apply(null, args);
    } catch (error) {
      console.error("mcpApp " + event + " listener failed", error);
    }
  }

  function emit(event, args) {
    listeners[event].forEach(function (listener) {
      call(event, listener, args);
    });
  }

  function dataOf(result) {
    return result && typeof result.structuredContent === "object" ? result.structuredContent : null;
  }

  function lookup(data, path) {
    return path.split(".").reduce(function (value, key) {
      return value !== null && value !== undefined ? value[key] : undefined;
    }, data);
  }

  function fill(data) {
    var elements = document.querySelectorAll("[data-mcp-text]");
    for (var i = 0; i < elements.length; i++) {
      var value = lookup(data, elements[i].getAttribute("data-mcp-text"));
      elements[i].textContent = value === null || value === undefined ? "" : String(value);
    }
  }

  function setState(state) {
    document.documentElement.setAttribute("data-mcp-state", state);
  }

  function onResult(result) {
    latest.result = result;
    var data = dataOf(result);
    setState(result && result.isError ? "error" : "ready");
    if (data) fill(data);
    emit("result", [result, data]);
  }

  function answer(message, result) {
    post({ id: message.id, result: result });
  }

  function handle(message) {
    var params = message.params || {};
    switch (message.method) {
      case "ui/notifications/tool-input":
        latest.input = params.arguments || {};
        emit("input", [latest.input]);
        return;
      case "ui/notifications/tool-result":
        onResult(params);
        return;
      case "ui/notifications/tool-cancelled":
        setState("cancelled");
        emit("cancelled", [params.reason]);
        return;
      case "ui/notifications/host-context-changed":
        emit("context", [params]);
        return;
      case "ui/resource-teardown":
        emit("teardown", [params]);
        answer(message, {});
        return;
      case "ping":
        answer(message, {});
        return;
    }
    if (message.id !== undefined) {
      post({ id: message.id, error: { code: -32601, message: "Method not found: " + message.method } });
    }
  }

  window.addEventListener("message", function (event) {
    if (event.source !== host) return; // only the host speaks to us
    var message = event.data;
    if (!message || message.jsonrpc !== "2.0") return;
    if (message.method) {
      handle(message);
    } else if (message.id !== undefined && pending[message.id]) {
      var waiting = pending[message.id];
      delete pending[message.id];
      if (message.error) {
        var error = new Error(message.error.message || "The host refused the request");
        error.code = message.error.code;
        error.data = message.error.data;
        waiting.reject(error);
      } else {
        waiting.resolve(message.result);
      }
    }
  });

  setState("loading");

  var app = {
    /** The host's answer to ui/initialize (hostInfo, hostCapabilities, hostContext), once it came. */
    ready: request("ui/initialize", {
      appInfo: { name: document.title || "django-mcp-expose app", version: "1" },
      appCapabilities: {},
      protocolVersion: PROTOCOL_VERSION,
    }).then(function (result) {
      app.host = result;
      notify("ui/notifications/initialized");
      if (typeof ResizeObserver === "function") {
        new ResizeObserver(function () {
          var root = document.documentElement;
          notify("ui/notifications/size-changed", { width: root.scrollWidth, height: root.scrollHeight });
        }).observe(document.documentElement);
      }
      return result;
    }),
    host: null,
    /** Listen for "input", "result", "cancelled", "context" or "teardown"; input and result replay the latest. */
    on: function (event, listener) {
      if (!listeners[event]) throw new Error("mcpApp.on: unknown event " + event);
      listeners[event].push(listener);
      if (event === "input" && latest.input !== undefined) call(event, listener, [latest.input]);
      if (event === "result" && latest.result !== undefined) {
        call(event, listener, [latest.result, dataOf(latest.result)]);
      }
      return app;
    },
    get input() {
      return latest.input;
    },
    get result() {
      return latest.result;
    },
    get data() {
      return dataOf(latest.result);
    },
    /** Call one of the server's tools through the host (it must be visible to apps). */
    callTool: function (name, args) {
      return app.ready.then(function () {
        return request("tools/call", { name: name, arguments: args || {} });
      });
    },
    readResource: function (uri) {
      return app.ready.then(function () {
        return request("resources/read", { uri: uri });
      });
    },
    openLink: function (url) {
      return app.ready.then(function () {
        return request("ui/open-link", { url: url });
      });
    },
    sendMessage: function (text) {
      return app.ready.then(function () {
        return request("ui/message", { role: "user", content: [{ type: "text", text: String(text) }] });
      });
    },
    updateModelContext: function (structuredContent) {
      return app.ready.then(function () {
        return request("ui/update-model-context", { structuredContent: structuredContent });
      });
    },
    /** Show a result the page fetched itself (e.g. from callTool) as if the host had sent it. */
    show: onResult,
  };
  window.mcpApp = app;
})();
