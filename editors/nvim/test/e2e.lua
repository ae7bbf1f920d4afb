-- The plugin in a real Neovim, end to end, against the real server:
--   nvim --headless -u NONE -c 'luafile editors/nvim/test/e2e.lua'
-- Environment: DRTRITON_PYTHON (the interpreter with the server), DRTRITON_WORKSPACE (a folder
-- holding small_block.py), DRTRITON_OBSERVATIONS (the JSON file to write), DRTRITON_TIMEOUT
-- (seconds for the conversion, default 180).
-- It acts as a user does (the code action at the cursor, the plugin's commands, a hover) and
-- records what the editor then holds: buffers, windows, diagnostics, progress, messages. The
-- Python test (tests/test_editors_nvim.py) asserts on that record. A step that never happens
-- ends the script with exit code 1, its reason in the record and on stdout.
local here = vim.fs.dirname(vim.fs.normalize(debug.getinfo(1, 'S').source:sub(2)))
vim.opt.runtimepath:prepend(vim.fs.dirname(here)) -- editors/nvim: lua/drtriton
vim.cmd('filetype on') -- -u NONE leaves it off, and the client starts on FileType python

local workspace = assert(vim.env.DRTRITON_WORKSPACE, 'DRTRITON_WORKSPACE is not set')
local observations = assert(vim.env.DRTRITON_OBSERVATIONS, 'DRTRITON_OBSERVATIONS is not set')
local timeout_ms = tonumber(vim.env.DRTRITON_TIMEOUT or '180') * 1000
local started = vim.uv.hrtime()
local seen = { steps = {}, notifications = {}, progress = {}, conversions = {} }

local function elapsed()
  return (vim.uv.hrtime() - started) / 1e9
end

local function say(...)
  local line = ('[%6.1f s] %s'):format(elapsed(), table.concat({ ... }, ' '))
  table.insert(seen.steps, line)
  io.stdout:write(line, '\n')
  io.stdout:flush()
end

local function wait(what, ms, predicate)
  if not vim.wait(ms, predicate, 50) then
    error('timed out after ' .. ms / 1000 .. ' s waiting for ' .. what, 0)
  end
  say('ok:', what)
end

local function lines_of(buf)
  return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
end

local function text_of(buf)
  return table.concat(lines_of(buf), '\n')
end

-- what reaches the user, kept as it arrives
vim.notify = function(msg, level) -- headless: nothing would show them
  table.insert(seen.notifications, { message = msg, level = level or vim.log.levels.INFO })
  say('notify:', msg)
end
vim.api.nvim_create_autocmd('LspProgress', {
  callback = function(ev)
    local value = ev.data.params.value
    table.insert(seen.progress, { kind = value.kind, title = value.title, message = value.message })
  end,
})
vim.api.nvim_create_autocmd('User', { -- the plugin's event for `$/drtriton/conversion`
  pattern = 'DRTritonConversion',
  callback = function(ev)
    table.insert(seen.conversions, ev.data)
  end,
})

local function last_conversion_ended()
  local last = seen.conversions[#seen.conversions]
  return last ~= nil and vim.tbl_contains({ 'done', 'cancelled', 'failed' }, last.state)
end

local function run()
  require('drtriton').setup({
    python = vim.env.DRTRITON_PYTHON,
    -- the Triton interpreter on the CPU; the search stops at its first correct module there
    settings = { device = 'cpu', searchBudgetSeconds = 60 },
  })
  local source = workspace .. '/small_block.py'
  vim.cmd.edit(vim.fn.fnameescape(source))
  local buf = vim.api.nvim_get_current_buf()

  local client
  wait('the drtriton client to start', 60000, function()
    client = vim.lsp.get_clients({ name = 'drtriton', bufnr = buf })[1]
    return client ~= nil and client.initialized
  end)
  seen.server_cmd = client.config.cmd
  seen.offset_encoding = client.offset_encoding

  local class_line = vim.fn.search('^class SmallBlock') -- 1-based; moves the cursor there
  assert(class_line > 0, 'no class SmallBlock in ' .. source)
  seen.class_line = class_line - 1

  -- every change the server makes to the output buffer, from the moment it is loaded
  local output = workspace .. '/small_block_triton.py'
  seen.output_changes = {} -- the time and line count after each
  vim.api.nvim_create_autocmd('BufReadPost', {
    pattern = '*/small_block_triton.py',
    once = true,
    callback = function(ev)
      vim.api.nvim_buf_attach(ev.buf, false, {
        on_lines = function(_, b)
          table.insert(seen.output_changes, { t = elapsed(), lines = vim.api.nvim_buf_line_count(b) })
        end,
      })
    end,
  })

  -- the code action, as a user picks it from vim.lsp.buf.code_action()
  local title = 'Convert SmallBlock to Triton'
  local offered = {}
  vim.lsp.buf.code_action({
    apply = true,
    filter = function(a)
      table.insert(offered, a.title)
      return a.title == title
    end,
  })
  wait('the code action "' .. title .. '"', 30000, function()
    return #seen.conversions > 0
  end)
  seen.code_actions = offered

  -- the output file: created by the server, shown in a window, filled as the module streams in
  local out_buf = -1
  wait('the output buffer to be created', 60000, function()
    out_buf = vim.fn.bufnr(output)
    return out_buf ~= -1 and vim.api.nvim_buf_is_loaded(out_buf)
  end)
  wait('class SmallBlockTriton in ' .. vim.fs.basename(output), timeout_ms, function()
    return text_of(out_buf):find('class SmallBlockTriton%(nn.Module%)') ~= nil
  end)
  wait('the conversion to end', timeout_ms, last_conversion_ended)

  wait('the verdict diagnostic on the class', 10000, function()
    return vim.iter(vim.diagnostic.get(buf)):any(function(d)
      return d.source == 'drtriton' and not d.message:find('so far')
    end)
  end)
  seen.diagnostics = vim.tbl_map(function(d)
    return { lnum = d.lnum, col = d.col, severity = d.severity, message = d.message, source = d.source }
  end, vim.diagnostic.get(buf))
  wait('the verdict code lens on the class', 10000, function()
    return vim.iter(vim.lsp.codelens.get(buf)):any(function(l)
      return l.command ~= nil and l.command.command == 'drtriton.report' -- a finished conversion's
    end)
  end)
  seen.codelenses = vim.tbl_map(function(l)
    return { lnum = l.range.start.line, title = l.command and l.command.title, command = l.command and l.command.command }
  end, vim.lsp.codelens.get(buf))
  seen.output_text = text_of(out_buf)
  seen.output_modified = vim.bo[out_buf].modified
  seen.output_in_window = vim.fn.bufwinid(out_buf) ~= -1

  -- the hover on the class line (what K shows)
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  local hover = client:request_sync('textDocument/hover', params, 10000, buf)
  seen.hover = hover and hover.result and hover.result.contents.value or vim.NIL
  say('ok: hover')

  vim.cmd('DRTritonReport')
  local report = -1
  wait('the :DRTritonReport buffer', 10000, function()
    report = vim.fn.bufnr('DRTriton report: SmallBlock')
    return report ~= -1 and text_of(report) ~= ''
  end)
  seen.report = text_of(report)
  seen.report_filetype = vim.bo[report].filetype

  -- :DRTritonConvert then :DRTritonCancel, from the source buffer with the cursor in the class
  vim.api.nvim_set_current_win(vim.fn.bufwinid(buf))
  vim.api.nvim_win_set_cursor(0, { class_line, 0 })
  local before = #seen.conversions
  vim.cmd('DRTritonConvert')
  wait('a second conversion to start (:DRTritonConvert)', 30000, function()
    return #seen.conversions > before
  end)
  vim.cmd('DRTritonCancel')
  wait('the second conversion to end (:DRTritonCancel)', 60000, last_conversion_ended)

  vim.cmd('checkhealth drtriton')
  seen.checkhealth = text_of(vim.api.nvim_get_current_buf())
  seen.statusline = require('drtriton').statusline()
end

local ok, err = xpcall(run, debug.traceback)
seen.passed = ok
if not ok then
  seen.error = tostring(err)
  say('FAIL:', seen.error)
else
  say('PASS')
end
vim.fn.writefile({ vim.json.encode(seen) }, observations)
vim.cmd(ok and 'qall!' or 'cquit 1')
