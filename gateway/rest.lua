-- The REST face of the contract, in the gateway: no Python in the request path.
--
-- On a REST request: empty query values mean unset and are dropped; a known path asked
-- with another method is answered 405 with `Allow`; a query value of the wrong type is
-- refused naming its parameter (never its value). On the answer: a refusal takes the
-- HTTP status and body the service rendered beside its gRPC status (trainyard/rest.py),
-- an empty claim answers 204, and a client call answered with its future 202. gRPC clients' requests and answers pass untouched.
--
-- `ROUTES` (each REST route's path pattern, methods and typed query parameters) is
-- generated from the descriptor set by gateway/render.py and prepended to this file.

-- What a refusal no service rendered answers, by its HTTP status.
local FALLBACK = {[400] = "VALIDATION_ERROR", [401] = "UNAUTHENTICATED", [403] = "PERMISSION_DENIED",
  [404] = "NOT_FOUND", [409] = "CONFLICT", [501] = "UNIMPLEMENTED", [503] = "UNAVAILABLE",
  [504] = "UNAVAILABLE"}
local TITLES = {VALIDATION_ERROR = "Invalid request", UNAUTHENTICATED = "Unauthenticated",
  PERMISSION_DENIED = "Permission denied", NOT_FOUND = "Not found", CONFLICT = "Conflict",
  UNIMPLEMENTED = "Not implemented", UNAVAILABLE = "Unavailable", INTERNAL_ERROR = "Internal error"}
local DETAILS = {VALIDATION_ERROR = "The request is not valid.",
  UNAUTHENTICATED = "A valid API key is required.",
  PERMISSION_DENIED = "The key's role may not call this.", NOT_FOUND = "No such resource.",
  CONFLICT = "The request conflicts with the resource's state.",
  UNIMPLEMENTED = "This method is not served yet.",
  UNAVAILABLE = "The service is unavailable; retry later.",
  INTERNAL_ERROR = "The service failed to answer; retry later."}

local REST_STATUS = "x-trainyard-http-status"
local REST_BODY = "x-trainyard-http-body"
local PROBLEM = "application/problem+json"

local function problem(status, code, title, detail, fields)
  local names = ""
  if fields then
    names = ',"fields":["' .. table.concat(fields, '","') .. '"]'
  end
  return string.format(
    '{"code":"%s","detail":"%s"%s,"status":%d,"title":"%s","type":"https://trainyard.dev/problems/%s"}',
    code, detail, names, status, title, string.lower(string.gsub(code, "_", "-")))
end

-- Answer at once; Envoy's own answers (local_reply_config) leave this one as it is.
local function answer(handle, headers, body)
  handle:streamInfo():dynamicMetadata():set("envoy.filters.http.lua", "answered", true)
  handle:respond(headers, body)
end

local function is_rest(headers)
  local kind = headers:get("content-type") or ""
  return string.sub(kind, 1, 16) ~= "application/grpc"
end

-- The query without its empty values, and each value by name.
local function query_of(raw)
  local kept, values = {}, {}
  for pair in string.gmatch(raw, "[^&]+") do
    local name, value = string.match(pair, "^([^=]*)=(.*)$")
    if name == nil then
      name, value = pair, ""
    end
    if value ~= "" then
      kept[#kept + 1] = pair
      values[name] = value
    end
  end
  return table.concat(kept, "&"), values
end

local WORDS = {int = "an integer", uint = "a non-negative integer", bool = "true or false"}

local function valid(kind, value)
  if kind == "int" then
    return string.match(value, "^%-?%d+$") ~= nil and #value <= 19
  elseif kind == "uint" then
    return string.match(value, "^%d+$") ~= nil and #value <= 20
  elseif kind == "bool" then
    return value == "true" or value == "false"
  end
  return true
end

function envoy_on_request(handle)
  local headers = handle:headers()
  if not is_rest(headers) then
    return
  end
  handle:streamInfo():dynamicMetadata():set("envoy.filters.http.lua", "rest", true)
  -- A header HTTP allows but gRPC metadata does not (`a$b`) would be refused by the
  -- service's gRPC stack as a server error: it is not the service's to read, so it goes.
  local illegal = {}
  for name, _ in pairs(headers) do
    if not string.match(name, "^:?[0-9a-z_.%-]+$") then
      illegal[#illegal + 1] = name
    end
  end
  for _, name in ipairs(illegal) do
    headers:remove(name)
  end
  local full = headers:get(":path") or ""
  local path, raw = string.match(full, "^([^?]*)%??(.*)$")
  local query, values = query_of(raw)
  if query ~= raw then
    headers:replace(":path", query == "" and path or (path .. "?" .. query))
  end
  local method = headers:get(":method")
  local allowed = nil
  for _, route in ipairs(ROUTES) do
    if string.match(path, route.pattern) then
      local params = route.methods[method]
      if params then
        for name, kind in pairs(params) do
          local value = values[name]
          if value ~= nil and not valid(kind, value) then
            answer(handle, {[":status"] = "400", ["content-type"] = PROBLEM},
              problem(400, "VALIDATION_ERROR", "Invalid request",
                "Query parameter " .. name .. " must be " .. WORDS[kind] .. ".", {name}))
            return
          end
        end
        return
      end
      allowed = route.allow
    end
  end
  if allowed then
    answer(handle, {[":status"] = "405", ["allow"] = allowed, ["content-type"] = PROBLEM},
      problem(405, "METHOD_NOT_ALLOWED", "Method not allowed",
        "The path does not answer this method; see the Allow header."))
  end
end

function envoy_on_response(handle)
  local headers = handle:headers()
  local status, body = headers:get(REST_STATUS), headers:get(REST_BODY)
  headers:remove(REST_STATUS)
  headers:remove(REST_BODY)
  local meta = handle:streamInfo():dynamicMetadata():get("envoy.filters.http.lua")
  if meta == nil or not meta["rest"] then
    return
  end
  -- The gRPC answer's own headers mean nothing to a REST client.
  headers:remove("grpc-status")
  headers:remove("grpc-message")
  headers:remove("grpc-accept-encoding")
  if status == nil then
    local code = tonumber(headers:get(":status")) or 200
    local kind = headers:get("content-type") or ""
    if code >= 400 and kind ~= PROBLEM then
      -- A refusal no service rendered (its gRPC stack refused the call): still a problem.
      local reason = FALLBACK[code] or (code >= 500 and "INTERNAL_ERROR" or "VALIDATION_ERROR")
      headers:replace("content-type", PROBLEM)
      handle:body():setBytes(problem(code, reason, TITLES[reason], DETAILS[reason]))
    end
    return
  end
  if body ~= nil then
    headers:replace(":status", status)
    -- The money refusals answer the money wire's `{"error": …}`, the rest a problem.
    local money = string.sub(body, 1, 9) == '{"error":'
    headers:replace("content-type", money and "application/json" or PROBLEM)
    handle:body():setBytes(body)
  elseif status == "204" then
    headers:replace(":status", "204")
    headers:remove("content-type")
    handle:body():setBytes("")
    headers:remove("content-length")
  elseif status == "202" then
    -- A training client's call that has not ended in time: its future, in the body.
    headers:replace(":status", "202")
  end
end
