-- DRTriton for Neovim (0.10 and newer): the language server `python -m drtriton.server`, user
-- commands, and progress. Code actions ("Convert <Class> to Triton"), diagnostics, code lenses,
-- hovers and the streamed output file come from the server through Neovim's LSP client.
local M = {}

local NAME = 'drtriton'
local CONVERT, CANCEL, REPORT = 'drtriton.convert', 'drtriton.cancel', 'drtriton.report' -- server/server.py

local defaults = {
  -- The interpreter with DRTriton installed; nil: $VIRTUAL_ENV's python, else python3.
  python = nil,
  -- The whole server command; nil: { python, '-m', 'drtriton.server' }.
  cmd = nil,
  -- The `drtriton` settings the server asks for (workspace/configuration): policy, endpoint,
  -- model, device, mode, searchBudgetSeconds, cudaGraph, output.
  settings = {},
  filetypes = { 'python' },
  root_markers = { 'pyproject.toml', 'setup.py', 'setup.cfg', '.git' },
  -- Progress of conversions: 'notify' (vim.notify when one begins and ends; the latest step is
  -- in require('drtriton').statusline() either way) or false.
  progress = 'notify',
  -- Show the server's code lenses (the verdict above the class). Neovim shows lenses only when
  -- asked (vim.lsp.codelens.refresh), so the plugin asks when a buffer attaches and whenever a
  -- conversion changes state.
  codelens = true,
}

M.config = vim.deepcopy(defaults)
M.running = {} -- job id -> the server's `$/drtriton/conversion` record, while queued or running
M.progress = nil -- the latest progress line

function M.python()
  if M.config.python then
    return vim.fn.expand(M.config.python)
  end
  local venv = vim.env.VIRTUAL_ENV
  if venv and vim.fn.executable(venv .. '/bin/python') == 1 then
    return venv .. '/bin/python'
  end
  return 'python3'
end

function M.cmd()
  return M.config.cmd or { M.python(), '-m', 'drtriton.server' }
end

-- Client methods are called with `:` from 0.11 on (the `.` form is deprecated there).
local function request(client, method, params, handler, bufnr)
  if vim.fn.has('nvim-0.11') == 1 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local function client_for(bufnr)
  return vim.lsp.get_clients({ name = NAME, bufnr = bufnr })[1]
end

local function execute(client, bufnr, command, arguments, on_result)
  request(client, 'workspace/executeCommand', { command = command, arguments = arguments }, function(err, result)
    if err then
      vim.notify('DRTriton: ' .. command .. ' failed: ' .. err.message, vim.log.levels.ERROR)
    elseif on_result then
      on_result(result)
    end
  end, bufnr)
end

-- The module classes at the cursor, as the server sees them: its "Convert <Class> to Triton"
-- code actions name them, so the plugin does not parse Python itself.
local function classes_at_cursor(client, bufnr, on_classes)
  local params = vim.lsp.util.make_range_params(0, client.offset_encoding)
  params.context = { diagnostics = {}, only = { 'refactor.rewrite' } }
  request(client, 'textDocument/codeAction', params, function(err, actions)
    local names = {}
    for _, a in ipairs(err and {} or actions or {}) do
      local command = type(a.command) == 'table' and a.command or a
      if command.command == CONVERT then
        table.insert(names, command.arguments[2])
      end
    end
    on_classes(names)
  end, bufnr)
end

-- Runs `fn(client, bufnr, uri, class)` for the class named in the command, or the one at the
-- cursor (asking when there are several).
local function with_class(what, name, fn)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = client_for(bufnr)
  if not client then
    vim.notify('DRTriton: no language server on this buffer (see :checkhealth drtriton)', vim.log.levels.WARN)
    return
  end
  local uri = vim.uri_from_bufnr(bufnr)
  if name and name ~= '' then
    return fn(client, bufnr, uri, name)
  end
  classes_at_cursor(client, bufnr, function(names)
    if #names == 0 then
      vim.notify('DRTriton: put the cursor in an nn.Module subclass to ' .. what .. ' it', vim.log.levels.INFO)
    elseif #names == 1 then
      fn(client, bufnr, uri, names[1])
    else
      vim.ui.select(names, { prompt = 'Class to ' .. what }, function(choice)
        if choice then
          fn(client, bufnr, uri, choice)
        end
      end)
    end
  end)
end

function M.convert(name)
  with_class('convert', name, function(client, bufnr, uri, class)
    execute(client, bufnr, CONVERT, { uri, class })
  end)
end

function M.cancel(name, all)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = client_for(bufnr)
  if not client then
    return vim.notify('DRTriton: no language server on this buffer', vim.log.levels.WARN)
  end
  -- the server cancels what its arguments name: a class, every conversion of a file, or (no
  -- arguments at all: an empty Lua table would go out as a JSON object) every conversion
  local args = nil
  if not all then
    args = { vim.uri_from_bufnr(bufnr), (name ~= '' and name) or nil }
  end
  execute(client, bufnr, CANCEL, args, function(result)
    vim.notify(('DRTriton: cancelled %d conversion(s)'):format(result and result.cancelled or 0))
  end)
end

-- The full report in a scratch Markdown buffer (one per class, reused).
function M.report(name)
  with_class('report on', name, function(client, bufnr, uri, class)
    execute(client, bufnr, REPORT, { uri, class }, function(markdown)
      if type(markdown) ~= 'string' then
        return vim.notify('DRTriton: no conversion of ' .. class .. ' yet', vim.log.levels.INFO)
      end
      local title = 'DRTriton report: ' .. class
      local buf = vim.fn.bufnr(title)
      if buf == -1 then
        buf = vim.api.nvim_create_buf(false, true)
        vim.api.nvim_buf_set_name(buf, title)
        vim.bo[buf].filetype = 'markdown'
      end
      vim.bo[buf].modifiable = true
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(markdown, '\n', { trimempty = true }))
      vim.bo[buf].modifiable = false
      if vim.fn.bufwinid(buf) == -1 then
        vim.cmd('botright split')
        vim.api.nvim_win_set_buf(0, buf)
      end
    end)
  end)
end

-- For a statusline: the conversions running and the latest progress line, or ''.
function M.statusline()
  local n = vim.tbl_count(M.running)
  if n == 0 then
    return ''
  end
  return ('DRTriton: %d running%s'):format(n, M.progress and (' · ' .. M.progress) or '')
end

local function refresh_lenses(bufnr)
  if M.config.codelens and vim.api.nvim_buf_is_loaded(bufnr) then
    vim.lsp.codelens.refresh({ bufnr = bufnr })
  end
end

local function on_conversion(_, record)
  if record.state == 'queued' or record.state == 'running' then
    M.running[record.job] = record
  else
    M.running[record.job] = nil
  end
  local source = vim.fn.bufnr(vim.uri_to_fname(record.uri))
  if source ~= -1 then
    refresh_lenses(source)
  end
  vim.api.nvim_exec_autocmds('User', { pattern = 'DRTritonConversion', data = record })
end

local function on_progress(ev)
  local client = vim.lsp.get_client_by_id(ev.data.client_id)
  local value = ev.data.params and ev.data.params.value
  if not client or client.name ~= NAME or type(value) ~= 'table' then
    return
  end
  M.progress = value.kind ~= 'end' and (value.message or value.title) or nil
  if M.config.progress == 'notify' and value.kind ~= 'report' then
    vim.notify('DRTriton: ' .. (value.kind == 'begin' and value.title or value.message or ''), vim.log.levels.INFO)
  end
  vim.cmd.redrawstatus()
end

local function client_config()
  return {
    name = NAME,
    cmd = M.cmd(),
    filetypes = M.config.filetypes,
    root_markers = M.config.root_markers,
    settings = { drtriton = M.config.settings },
    handlers = { ['$/drtriton/conversion'] = on_conversion },
  }
end

local function create_commands()
  local function command(name, fn, opts)
    vim.api.nvim_create_user_command(name, fn, vim.tbl_extend('force', { nargs = '?' }, opts or {}))
  end
  command('DRTritonConvert', function(o) M.convert(o.args) end,
    { desc = 'DRTriton: convert the class at the cursor (or the one named) to Triton' })
  command('DRTritonReport', function(o) M.report(o.args) end,
    { desc = 'DRTriton: the report of the class at the cursor (or the one named)' })
  command('DRTritonCancel', function(o) M.cancel(o.args, o.bang) end,
    { bang = true, desc = "DRTriton: cancel this file's conversions (of one class when named; all with !)" })
end

function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(defaults), opts or {})
  M.did_setup = true
  local group = vim.api.nvim_create_augroup('drtriton', { clear = true })
  create_commands()
  vim.api.nvim_create_autocmd('LspProgress', { group = group, callback = on_progress })
  vim.api.nvim_create_autocmd('LspAttach', {
    group = group,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == NAME then
        refresh_lenses(ev.buf)
      end
    end,
  })

  local config = client_config()
  if vim.lsp.config and vim.lsp.enable then -- 0.11: the built-in configuration and enablement
    vim.lsp.config(NAME, config)
    vim.lsp.enable(NAME)
    return
  end
  -- 0.10: start (or reuse: same name and root) the client for each Python buffer, those open
  -- already included
  local function attach(buf)
    local root = vim.fs.root(buf, config.root_markers) or vim.fs.dirname(vim.api.nvim_buf_get_name(buf))
    vim.lsp.start(vim.tbl_extend('force', config, { root_dir = root }), { bufnr = buf })
  end
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = config.filetypes,
    callback = function(ev) attach(ev.buf) end,
  })
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(buf) and vim.tbl_contains(config.filetypes, vim.bo[buf].filetype) then
      attach(buf)
    end
  end
end

return M
