-- The REST face of the contract, in the gateway: no Python in the request path.
--
-- On a REST request: empty query values mean unset and are dropped; a known path asked
-- with another method is answered 405 with `Allow`; a query value of the wrong type is
-- refused naming its parameter (never its value). On the answer: a refusal takes the
-- HTTP status and body the service rendered beside its gRPC status (trainyard/rest.py),
-- an empty claim answers 204, a client call answered with its future 202, and a
-- JSON answer carries 64-bit integers as numbers and the contract's `null`s. gRPC clients'
-- requests and answers pass untouched.
--
-- `ROUTES` (each REST route's path pattern, methods, typed query parameters and the message
-- each method answers) and `SHAPES` (what an answer's JSON rewrites, by message) are
-- generated from the descriptor set by gateway/render.py and prepended to this file, and so
-- is `TITLES`, each reason's title from the one table of reasons (trainyard/rest.py). A
-- refusal's `code` is its reason in lower case, as every REST refusal's is.

-- What a refusal no service rendered answers, by its HTTP status.
local FALLBACK = {[400] = "INVALID_REQUEST", [401] = "UNAUTHENTICATED", [403] = "PERMISSION_DENIED",
  [404] = "NOT_FOUND", [409] = "CONFLICT", [413] = "PAYLOAD_TOO_LARGE", [501] = "UNIMPLEMENTED",
  [503] = "UNAVAILABLE", [504] = "UNAVAILABLE"}
local DETAILS = {INVALID_REQUEST = "The request is not valid.",
  UNAUTHENTICATED = "A valid API key is required.",
  PERMISSION_DENIED = "The key's role may not call this.", NOT_FOUND = "No such resource.",
  CONFLICT = "The request conflicts with the resource's state.",
  UNIMPLEMENTED = "This method is not served yet.",
  UNAVAILABLE = "The service is unavailable; retry later.",
  INTERNAL_ERROR = "The service failed to answer; retry later.",
  PAYLOAD_TOO_LARGE = "The request body is too large."}

local REST_STATUS = "x-trainyard-http-status"
local REST_BODY = "x-trainyard-http-body"
local PROBLEM = "application/problem+json"

-- `metadata`, when given, is the JSON text of the problem's metadata object.
local function problem(status, code, title, detail, fields, metadata)
  local names = ""
  if fields then
    names = ',"fields":["' .. table.concat(fields, '","') .. '"]'
  end
  if metadata then
    names = names .. ',"metadata":' .. metadata
  end
  return string.format(
    '{"code":"%s","detail":"%s"%s,"status":%d,"title":"%s","type":"https://trainyard.dev/problems/%s"}',
    string.lower(code), detail, names, status, title, string.lower(string.gsub(code, "_", "-")))
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

-- The answer's JSON, rewritten by its message's shape (`SHAPES`, generated from the
-- descriptor set): each 64-bit integer proto JSON wrote as a string becomes a number, and a
-- field the contract shows as `null` is written `null` when unset. Envoy's LuaJIT has no JSON
-- library, so this scanner copies the text and changes only what the shape names, by message
-- and field (never by a name alone); anything it cannot read leaves the answer as it was.
local function blank(s, i)
  return string.find(s, "[^ \t\r\n]", i) or (#s + 1)
end

-- The index just past the string that starts at `i`.
local function past_string(s, i)
  local j = i + 1
  while true do
    local k = string.find(s, '["\\]', j)
    if k == nil then
      error("unterminated string")
    end
    if string.sub(s, k, k) == "\\" then
      j = k + 2
    else
      return k + 1
    end
  end
end

-- The index just past the value that starts at `i`, read as it is.
local function past_value(s, i)
  local c = string.sub(s, i, i)
  if c == '"' then
    return past_string(s, i)
  elseif c == "{" or c == "[" then
    local depth, j = 0, i
    while true do
      local k = string.find(s, '[%[%]{}"]', j)
      if k == nil then
        error("unterminated value")
      end
      local d = string.sub(s, k, k)
      if d == '"' then
        j = past_string(s, k)
      elseif d == "{" or d == "[" then
        depth, j = depth + 1, k + 1
      else
        depth, j = depth - 1, k + 1
        if depth == 0 then
          return j
        end
      end
    end
  end
  return string.find(s, "[,%]} \t\r\n]", i) or (#s + 1)
end

local rewrite

-- The members of an object or the items of an array from `i`, each value rewritten by
-- `each(key)` (the key is nil in an array); `close` adds the last members of an object.
local function members(s, i, out, each, close)
  local open = string.sub(s, i, i)
  local last = open == "{" and "}" or "]"
  out[#out + 1] = open
  i = blank(s, i + 1)
  local first = true
  while string.sub(s, i, i) ~= last do
    if not first then
      if string.sub(s, i, i) ~= "," then
        error("expected a comma")
      end
      out[#out + 1] = ","
      i = blank(s, i + 1)
    end
    first = false
    local key = nil
    if open == "{" then
      local j = past_string(s, i)
      key = string.sub(s, i + 1, j - 2)
      out[#out + 1] = string.sub(s, i, j - 1) .. ":"
      i = blank(s, j)
      if string.sub(s, i, i) ~= ":" then
        error("expected a colon")
      end
      i = blank(s, i + 1)
    end
    i = blank(s, rewrite(s, i, each(key), out))
  end
  if close then
    close(out, first)
  end
  out[#out + 1] = last
  return i + 1
end

-- Writes the value at `i` by `kind` (nil: as it is; "int"; a message's name; {map = kind})
-- to `out`; answers the index past it.
rewrite = function(s, i, kind, out)
  local c = string.sub(s, i, i)
  if kind == nil or c == "n" then
    local j = past_value(s, i)
    out[#out + 1] = string.sub(s, i, j - 1)
    return j
  end
  if c == "[" then
    return members(s, i, out, function() return kind end)
  end
  if kind == "int" then
    local j = past_value(s, i)
    local text = string.sub(s, i, j - 1)
    out[#out + 1] = string.match(text, '^"(%-?%d+)"$') or text
    return j
  end
  if type(kind) == "table" then
    return members(s, i, out, function() return kind.map end)
  end
  local shape = SHAPES[kind]
  if shape == nil or c ~= "{" then
    return rewrite(s, i, nil, out)
  end
  local seen = {}
  return members(s, i, out, function(key)
    seen[key] = true
    return shape.fields[key]
  end, function(into, empty)
    for _, name in ipairs(shape.nulls) do
      if not seen[name] then
        into[#into + 1] = (empty and "" or ",") .. '"' .. name .. '":null'
        empty = false
      end
    end
  end)
end

-- `body` rewritten as the answer of message `kind`, or nil when it does not read as JSON.
function reshape(body, kind)
  local start = blank(body, 1)
  if string.sub(body, start, start) ~= "{" then
    return nil
  end
  local ok, text = pcall(function()
    local out = {}
    local i = blank(body, rewrite(body, blank(body, 1), kind, out))
    if i <= #body then
      error("trailing text")
    end
    return table.concat(out)
  end)
  return ok and text or nil
end

-- A request's body read strictly as RFC 8259 JSON before the transcoder, which reads it
-- leniently (a trailing comma, single quotes, comments, NaN). A key twice in one object is
-- refused too: RFC 8259 leaves its meaning to the reader, and a request means one thing.
-- The first fault is answered by its position; its words are fixed, never the body's text.
local function fault(at, why)
  error({at = at, why = why}, 0)
end

local ESCAPES = {['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n",
  r = "\r", t = "\t"}

-- What is wrong with the text at `i`, where a value (or a key, when `key`) should start.
local function unexpected(s, i, key)
  local c = string.sub(s, i, i)
  if c == "" then
    return "the body ends before its value does"
  elseif c == "'" then
    return "strings and keys take double quotes, not single ones"
  elseif c == "/" or c == "#" then
    return "comments are not JSON"
  elseif string.match(s, "^%-?[NI]", i) then
    return "NaN and Infinity are not JSON numbers"
  elseif key and string.match(c, "[%a_$]") then
    return "a key must be a string in double quotes"
  end
  return "a character that JSON does not allow here"
end

-- The index past the string at `i`, and its text with the escapes of ASCII decoded (so that
-- a key written twice, escaped or not, is found).
local function strict_string(s, i)
  local out, j = {}, i + 1
  while true do
    local k = string.find(s, '[%z\1-\31"\\]', j)
    if k == nil then
      fault(#s + 1, "a string is not closed")
    end
    out[#out + 1] = string.sub(s, j, k - 1)
    local c = string.sub(s, k, k)
    if c == '"' then
      return k + 1, table.concat(out)
    elseif c ~= "\\" then
      fault(k, "a control character in a string must be escaped")
    end
    local e = string.sub(s, k + 1, k + 1)
    local hex = e == "u" and string.match(s, "^%x%x%x%x", k + 2)
    if ESCAPES[e] then
      out[#out + 1], j = ESCAPES[e], k + 2
    elseif hex then
      local n = tonumber(hex, 16)
      out[#out + 1], j = n < 128 and string.char(n) or ("\\u" .. string.lower(hex)), k + 6
    else
      fault(k, "an escape that JSON does not have")
    end
  end
end

local function strict_number(s, i)
  local _, e = string.find(s, "^%-?[1-9]%d*", i)
  if e == nil then
    _, e = string.find(s, "^%-?0", i)
  end
  if e == nil then
    local j = string.sub(s, i, i) == "-" and i + 1 or i
    fault(j, unexpected(s, j))
  end
  local j = e + 1
  local c = string.sub(s, j, j)
  if c ~= "." and c ~= "e" and c ~= "E" then
    return j
  end
  if c == "." then
    _, e = string.find(s, "^%d+", j + 1)
    if e == nil then
      fault(j + 1, "a number's fraction needs a digit")
    end
    j = e + 1
  end
  if string.match(s, "^[eE]", j) then
    _, e = string.find(s, "^[+-]?%d+", j + 1)
    if e == nil then
      fault(j + 1, "a number's exponent needs a digit")
    end
    j = e + 1
  end
  return j
end

local strict_value

-- The index past the object or array at `i`.
local function strict_members(s, i, depth)
  local open = string.sub(s, i, i)
  local last = open == "{" and "}" or "]"
  local seen = {}
  i = blank(s, i + 1)
  if string.sub(s, i, i) == last then
    return i + 1
  end
  while true do
    if open == "{" then
      if string.sub(s, i, i) ~= '"' then
        fault(i, unexpected(s, i, true))
      end
      local j, key = strict_string(s, i)
      if seen[key] then
        fault(i, "a key appears twice in one object")
      end
      seen[key] = true
      i = blank(s, j)
      if string.sub(s, i, i) ~= ":" then
        fault(i, "a colon must follow a key")
      end
      i = i + 1
    end
    i = blank(s, strict_value(s, i, depth))
    local c = string.sub(s, i, i)
    if c == last then
      return i + 1
    elseif c == "" then
      fault(i, "the body ends before its value does")
    elseif c ~= "," then
      fault(i, "a comma or the end of the " .. (open == "{" and "object" or "array")
        .. " must follow a value")
    end
    i = blank(s, i + 1)
    if string.sub(s, i, i) == last then
      fault(i, "a trailing comma is not JSON")
    end
  end
end

strict_value = function(s, i, depth)
  i = blank(s, i)
  local c = string.sub(s, i, i)
  if c == "{" or c == "[" then
    if depth >= 64 then
      fault(i, "the body nests deeper than 64 levels")
    end
    return strict_members(s, i, depth + 1)
  elseif c == '"' then
    return (strict_string(s, i))
  elseif c == "-" or string.match(c, "^%d$") then
    return strict_number(s, i)
  end
  for _, word in ipairs({"true", "false", "null"}) do
    if string.sub(s, i, i + #word - 1) == word then
      return i + #word
    end
  end
  fault(i, unexpected(s, i))
end

-- nil when `s` is empty or strict JSON; else the first fault, `{at = byte index, why = …}`.
function json_fault(s)
  local start = blank(s, 1)
  if start > #s then
    return nil
  end
  local ok, err = pcall(function()
    local j = blank(s, strict_value(s, start, 0))
    if j <= #s then
      fault(j, "text follows the body's value")
    end
  end)
  if ok then
    return nil
  end
  return type(err) == "table" and err or {at = 1, why = "the body is not JSON"}
end

-- The line and column (both from 1, the column in bytes) of byte `at` of `s`.
local function position(s, at)
  local line, start = 1, 1
  for nl in string.gmatch(string.sub(s, 1, at - 1), "()\n") do
    line, start = line + 1, nl + 1
  end
  return line, at - start + 1
end

-- The problem a body that is not strict JSON is refused with, naming its first fault and
-- where it is (line and column from 1, the column in bytes; the byte offset from 0); nil
-- when the body is admitted.
function body_refusal(s)
  local err = json_fault(s)
  if err == nil then
    return nil
  end
  local line, column = position(s, err.at)
  return problem(400, "MALFORMED_JSON", TITLES.MALFORMED_JSON,
    string.format("The request body is not JSON (RFC 8259): %s, at line %d, column %d.",
      err.why, line, column), nil,
    string.format('{"column":"%d","line":"%d","offset":"%d"}', column, line, err.at - 1))
end

local function refused_body(handle)
  local body = handle:body()
  if body == nil or body:length() == 0 then
    return
  end
  local refusal = body_refusal(body:getBytes(0, body:length()))
  if refusal then
    answer(handle, {[":status"] = "400", ["content-type"] = PROBLEM}, refusal)
  end
end

local HAS_BODY = {POST = true, PUT = true, PATCH = true}

function envoy_on_request(handle)
  local headers = handle:headers()
  if not is_rest(headers) then
    return
  end
  -- The Tinker wire (services/tinker) answers in the Tinker SDK's shapes, untouched here.
  if string.sub(headers:get(":path") or "", 1, 8) == "/api/v1/" then
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
        if route.replies[method] then
          handle:streamInfo():dynamicMetadata():set("envoy.filters.http.lua", "reply",
            route.replies[method])
        end
        for name, kind in pairs(params) do
          local value = values[name]
          if value ~= nil and not valid(kind, value) then
            answer(handle, {[":status"] = "400", ["content-type"] = PROBLEM},
              problem(400, "INVALID_REQUEST", TITLES.INVALID_REQUEST,
                "Query parameter " .. name .. " must be " .. WORDS[kind] .. ".", {name}))
            return
          end
        end
        if HAS_BODY[method] then
          refused_body(handle)
        end
        return
      end
      allowed = route.allow
    end
  end
  if allowed then
    answer(handle, {[":status"] = "405", ["allow"] = allowed, ["content-type"] = PROBLEM},
      problem(405, "METHOD_NOT_ALLOWED", TITLES.METHOD_NOT_ALLOWED,
        "The path does not answer this method; see the Allow header."))
  end
end

-- Each line of a stream's chunk rewritten, or nil when a line does not read whole (the
-- transcoder writes each message of a stream as one chunk, a line of its own).
function reshape_lines(text, kind)
  local out = {}
  for line in string.gmatch(text, "([^\n]*)\n?") do
    if line ~= "" then
      local done = reshape(line, kind)
      if done == nil then
        return nil
      end
      out[#out + 1] = done
    end
  end
  local tail = string.sub(text, -1) == "\n" and "\n" or ""
  return table.concat(out, "\n") .. tail
end

-- A JSON answer of a message with a shape, rewritten whole; a stream's, chunk by chunk as
-- it passes, never held back; raw bytes have no shape and pass untouched.
local function reshaped(handle, headers, reply)
  local json = string.sub(headers:get("content-type") or "", 1, 16) == "application/json"
  if reply == nil or not json then
    return
  end
  local streamed, kind = string.match(reply, "^(stream:)(.*)$")
  if streamed then
    for chunk in handle:bodyChunks() do
      local text = reshape_lines(chunk:getBytes(0, chunk:length()), kind)
      if text then
        chunk:setBytes(text)
      end
    end
    return
  end
  kind = reply
  if SHAPES[kind] == nil then
    return
  end
  local body = handle:body()
  local text = reshape(body:getBytes(0, body:length()), kind)
  if text then
    body:setBytes(text)
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
      local reason = FALLBACK[code] or (code >= 500 and "INTERNAL_ERROR" or "INVALID_REQUEST")
      headers:replace("content-type", PROBLEM)
      handle:body():setBytes(problem(code, reason, TITLES[reason], DETAILS[reason]))
    elseif code == 200 then
      reshaped(handle, headers, meta["reply"])
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
    reshaped(handle, headers, meta["reply"])
  end
end
