// The one place that talks HTTP to the API and knows its envelope ({code, message, data,
// request_id}). Every call is a POST with a JSON body to a URL relative to this page, so the
// console works at /console locally and behind a stage prefix (…/v1/console) on AWS.
import { scope, storedKey } from "./session.js";

export class ApiError extends Error {
  constructor(code, message, data, requestId) {
    super(message);
    this.code = code;
    this.data = data;
    this.requestId = requestId;
  }
}

function requireScope(s) {
  const missing = ["team", "agent", "user"].filter((name) => !s[name]);
  if (missing.length) throw new ApiError("setup", `set ${missing.join(", ")} id first (Key and scope)`);
}

// route like "v3/atomic/query"; scoped calls carry team_id/agent_id/user_id.
export async function call(route, body = {}, { scoped = true } = {}) {
  const key = storedKey();
  if (!key) throw new ApiError("setup", "paste an API key first (Key and scope)");
  const s = scope();
  const payload = { ...body };
  if (scoped) {
    requireScope(s);
    Object.assign(payload, { team_id: s.team, agent_id: s.agent, user_id: s.user });
  }
  const url = new URL(route, document.baseURI);
  let response;
  try {
    response = await fetch(url, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        "Authorization": `Bearer ${key}`,
        "x-tdai-service-id": s.service,
      },
      body: JSON.stringify(payload),
      credentials: "omit",
      cache: "no-store",
      referrerPolicy: "no-referrer",
    });
  } catch (error) {
    throw new ApiError("network", `the request failed (${error.message})`);
  }
  let envelope = null;
  try { envelope = await response.json(); } catch (_) { envelope = null; }
  if (!envelope || typeof envelope !== "object") {
    throw new ApiError(response.status, `unexpected answer (HTTP ${response.status})`);
  }
  if (envelope.code !== 0 || !response.ok) {
    throw new ApiError(envelope.code ?? response.status, envelope.message || `HTTP ${response.status}`,
      envelope.data, envelope.request_id);
  }
  return envelope.data || {};
}
