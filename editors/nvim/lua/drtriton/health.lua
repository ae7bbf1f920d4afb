-- :checkhealth drtriton
local M = {}

function M.check()
  local health = vim.health
  local drtriton = require('drtriton')
  health.start('drtriton')

  local v = vim.version()
  local version = ('%d.%d.%d'):format(v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.10') == 1 then
    health.ok('Neovim ' .. version)
  else
    health.error('Neovim ' .. version .. ': DRTriton needs 0.10 or newer')
  end

  if not drtriton.did_setup then
    health.warn('require("drtriton").setup({...}) has not been called: no server starts')
  end

  local cmd = drtriton.cmd()
  if vim.fn.executable(cmd[1]) ~= 1 then
    health.error(cmd[1] .. ' is not an executable', 'set `python` (or `cmd`) in require("drtriton").setup()')
    return
  end
  health.ok('server command: ' .. table.concat(cmd, ' '))

  if drtriton.config.cmd == nil then -- our own command: check that its Python has the server
    -- drtriton.server.server imports pygls and lsprotocol: a broken install fails here, not at start-up
    local check = vim.system({ cmd[1], '-c', 'import drtriton.server.server' }, { text = true }):wait(60000)
    if check.code == 0 then
      health.ok(cmd[1] .. ' can run drtriton.server')
    else
      local lines = vim.split(vim.trim(check.stderr or ''), '\n')
      health.error(cmd[1] .. ' cannot run drtriton.server: ' .. (lines[#lines] or '?'),
        'pip install "drtriton[server]" into that interpreter')
    end
    -- what `drtriton doctor` finds there: versions, the device, the optional parts installed
    -- (it exits 1 when something is not usable, and still prints its report)
    local doctor = vim.system({ cmd[1], '-m', 'drtriton.cli', 'doctor' }, { text = true }):wait(60000)
    local report = vim.trim(doctor.stdout or '')
    if report ~= '' then
      for _, line in ipairs(vim.split(report, '\n')) do
        if line:find('NOT USABLE', 1, true) then
          health.error('doctor: ' .. line)
        else
          health.info('doctor: ' .. line)
        end
      end
    else
      local lines = vim.split(vim.trim(doctor.stderr or ''), '\n')
      health.error(cmd[1] .. ' -m drtriton.cli doctor failed: ' .. (lines[#lines] or '?'),
        'pip install drtriton into that interpreter')
    end
  end

  local clients = vim.lsp.get_clients({ name = 'drtriton' })
  if #clients > 0 then
    health.ok(('%d client(s) running, %d conversion(s) running'):format(#clients, vim.tbl_count(drtriton.running)))
  else
    health.info('no client running (one starts when a Python file opens)')
  end
end

return M
