// The extension in a real VS Code (code-server in Chromium), end to end, against the real server.
// tests/test_editors_vscode.py starts code-server with the .vsix installed and runs:
//   node editors/vscode/test/e2e.js
// Environment:
//   DRTRITON_URL        code-server's address, e.g. http://127.0.0.1:8123
//   DRTRITON_WORKSPACE  the folder to open; it holds small_block.py (and .vscode/settings.json)
//   DRTRITON_ARTIFACTS  where the screenshots and observations.json go
//   DRTRITON_CHROMIUM   the browser (default /usr/bin/chromium)
//   DRTRITON_SERVER_PID code-server's process id: the crash step kills the language server
//                       among its descendants
//   DRTRITON_TIMEOUT    seconds for the conversion (default 180)
//   DRTRITON_BROKEN_PYTHON  an interpreter that cannot run the server: the last step points
//                       drtriton.pythonPath at it and reads what the window then says
// It acts as a user does (clicks, keys, the mouse over a name) and records what the window shows
// in observations.json; the Python test asserts on that. It exits 1 when a step times out, with a
// screenshot of that moment (failure.png).
'use strict';
const fs = require('fs');
const path = require('path');
const { chromium } = require('playwright-core');

const url = need('DRTRITON_URL');
const workspace = need('DRTRITON_WORKSPACE');
const artifacts = need('DRTRITON_ARTIFACTS');
const conversionMs = Number(process.env.DRTRITON_TIMEOUT || '180') * 1000;
const started = Date.now();
const seen = { steps: [] }; // observations.json

function need(name) {
    const value = process.env[name];
    if (!value) {
        throw new Error(`${name} is not set`);
    }
    return value;
}

function say(...parts) {
    const line = `[${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${parts.join(' ')}`;
    console.log(line);
    seen.steps.push(line);
}

// Polls `probe` (which returns a value, or undefined/false to go on) until it answers.
async function waitFor(what, ms, probe, everyMs = 100) {
    const end = Date.now() + ms;
    for (;;) {
        const value = await probe().catch(() => undefined);
        if (value) {
            say('ok:', what);
            return value;
        }
        if (Date.now() > end) {
            throw new Error(`timed out after ${ms / 1000} s waiting for ${what}`);
        }
        await new Promise((r) => setTimeout(r, everyMs));
    }
}

async function shot(page, name) {
    const file = path.join(artifacts, `${name}.png`);
    await page.screenshot({ path: file });
    say('screenshot:', path.basename(file));
}

// The text of the lines an editor shows (Monaco renders only the visible ones), top to bottom.
async function visibleLines(editor) {
    return editor.locator('.view-line').evaluateAll((lines) => lines
        .map((l) => ({ top: parseFloat(l.style.top) || 0, text: l.textContent.replace(/\u00a0/g, ' ') }))
        .sort((a, b) => a.top - b.top)
        .map((l) => l.text));
}

const activeEditor = (page) => page.locator('.editor-group-container.active .editor-instance .monaco-editor').first();
const tab = (page, name) => page.locator(`.tabs-container .tab[aria-label^="${name}"]`).first();
const statusItem = (page) => page.locator('.statusbar-item', { hasText: 'DRTriton' }).first();
// The status-bar item in words (its accessibility label: server state, jobs running, best result).
const statusLabel = (page) => statusItem(page).locator('[aria-label]').first().getAttribute('aria-label');

// Every notification toast shown so far: toasts hide themselves after a while, so a watcher
// collects them from the start (see main) and the steps look here.
const toasts = new Set();
async function notifications() {
    return [...toasts];
}
function watchToasts(page) {
    const timer = setInterval(() => {
        page.locator('.notification-toast .notification-list-item-message').allTextContents()
            .then((texts) => texts.forEach((t) => toasts.add(t)), () => undefined);
    }, 100);
    return () => clearInterval(timer);
}

// Runs a command from the palette (F1), as a user types it.
async function palette(page, title) {
    await page.keyboard.press('F1');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ state: 'visible' });
    await input.fill(`>${title}`);
    await page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first().waitFor();
    await page.keyboard.press('Enter');
}

// The processes below `rootPid` (from /proc) whose command line passes `match`.
function processesBelow(rootPid, match) {
    const parent = new Map();
    for (const entry of fs.readdirSync('/proc')) {
        if (!/^\d+$/.test(entry)) {
            continue;
        }
        try {
            const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
            parent.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
        } catch {
            // gone meanwhile
        }
    }
    const descends = (pid) => {
        for (let p = pid, hops = 0; p > 1 && hops < 64; p = parent.get(p) ?? 0, hops++) {
            if (p === rootPid) {
                return true;
            }
        }
        return false;
    };
    return [...parent.keys()].filter((pid) => {
        try {
            const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
            return pid !== rootPid && descends(pid) && match(argv);
        } catch {
            return false;
        }
    });
}

// The language server's processes among code-server's descendants.
const serverProcesses = (rootPid) =>
    processesBelow(rootPid, (argv) => argv.includes('-m') && argv.includes('drtriton.server'));
const alive = (pid) => fs.existsSync(`/proc/${pid}`) && !/\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));

async function run(page) {
    await page.goto(`${url}/?folder=${encodeURIComponent(workspace)}`);
    await waitFor('the workbench', 60_000, () => page.locator('.monaco-workbench').isVisible());

    // open the file from the Explorer
    await page.locator('.explorer-folders-view .monaco-list-row', { hasText: 'small_block.py' }).first().click();
    seen.sourceLines = await waitFor('small_block.py in the editor', 30_000, async () => {
        const lines = await visibleLines(activeEditor(page));
        return lines.some((l) => l.startsWith('class SmallBlock(nn.Module)')) && lines;
    });
    await waitFor('the DRTriton status-bar item', 30_000, () => statusItem(page).isVisible());

    // the light bulb on the class line: it shows once the server answers the code action request
    // (the first request may come before the server runs: move the cursor again until it shows)
    const classLine = activeEditor(page).locator('.view-line', { hasText: 'class SmallBlock(nn.Module)' });
    const bulb = activeEditor(page).locator('.lightBulbWidget');
    let clicks = 0;
    await waitFor('the light bulb on the class line', 120_000, async () => {
        if (await bulb.isVisible()) {
            return true;
        }
        if (clicks++ % 20 === 0) { // every 2 s
            await page.keyboard.press('Escape');
            await activeEditor(page).locator('.view-line').first().click();
            await classLine.click();
        }
        return false;
    });
    await bulb.click();
    const action = page.locator('.action-widget .monaco-list-row', { hasText: 'Convert SmallBlock to Triton' });
    await waitFor('"Convert SmallBlock to Triton" in the light-bulb menu', 10_000, () => action.isVisible());
    seen.lightBulbMenu = await page.locator('.action-widget .monaco-list-row').allTextContents();
    await shot(page, '01-light-bulb');
    await action.click();
    const convertedAt = Date.now();

    // the output file opens (window/showDocument) and fills as the module streams in
    seen.statusWhileRunning = await waitFor('the status bar to show a running conversion', 30_000, async () => {
        const label = await statusLabel(page);
        return label.includes('1 running') && label;
    }, 50);
    const output = tab(page, 'small_block_triton.py');
    await waitFor('the small_block_triton.py tab', 60_000, () => output.isVisible(), 50);
    const snapshots = []; // the output editor's visible text each time it changed
    await waitFor('class SmallBlockTriton streamed into small_block_triton.py', conversionMs, async () => {
        if (!(await output.getAttribute('aria-selected') === 'true')) {
            await output.click();
        }
        const text = (await visibleLines(activeEditor(page))).join('\n');
        if (text && text !== snapshots[snapshots.length - 1]?.text) {
            snapshots.push({ ms: Date.now() - convertedAt, text });
            if (snapshots.length === 1) {
                await shot(page, '02-streaming');
            }
        }
        return /class SmallBlockTriton\(nn\.Module\)|@triton\.jit/.test(text);
    }, 50);
    seen.outputSnapshots = snapshots;

    // the verdict: a notification, then the diagnostic in the Problems panel
    seen.notification = await waitFor('the "converted" notification', conversionMs, async () =>
        (await notifications()).find((n) => n.includes('SmallBlock converted')));
    await page.keyboard.press('Control+Shift+M');
    const problem = page.locator('.markers-panel .monaco-list-row', { hasText: 'correct on' }).first();
    seen.problem = await waitFor('the verdict in the Problems panel', 30_000, async () =>
        (await problem.isVisible()) && (await problem.innerText()).replace(/\s+/g, ' '));
    seen.problemsPanel = (await page.locator('.markers-panel .monaco-list-row').allInnerTexts())
        .map((t) => t.replace(/\s+/g, ' '));
    seen.statusAfter = await statusLabel(page);
    await shot(page, '03-verdict');

    // the hover on the class name: the report
    await tab(page, 'small_block.py').click();
    const name = activeEditor(page).locator('.view-line', { hasText: 'class SmallBlock(nn.Module)' })
        .locator('span > span', { hasText: /^SmallBlock$/ }).first();
    const hover = page.locator('.monaco-hover:visible').first();
    seen.hover = await waitFor('the report in the hover on SmallBlock', 30_000, async () => {
        if (!(await hover.isVisible())) {
            await page.mouse.move(0, 0);
            await name.hover();
            await page.waitForTimeout(1000);
        }
        const text = await hover.innerText();
        return text.includes('DRTriton: SmallBlock') && text;
    }, 200);
    await shot(page, '04-hover');
    await page.mouse.move(0, 0);

    // DRTriton: Show Report (the command, with the cursor in the class)
    await classLine.click();
    await palette(page, 'DRTriton: Show Report');
    await waitFor('the report preview tab', 30_000, () => tab(page, 'Preview SmallBlock report.md').isVisible());
    seen.reportTab = await tab(page, 'Preview SmallBlock report.md').getAttribute('aria-label');
    await page.waitForTimeout(1500); // the preview renders in a webview
    await shot(page, '05-report');

    // the whole output file, found as a user would (Ctrl+F), then saved for the test to read
    await output.click();
    await waitFor('small_block_triton.py focused', 10_000, async () =>
        (await output.getAttribute('aria-selected')) === 'true');
    await activeEditor(page).locator('.view-line').first().click();
    seen.find = {};
    for (const needle of ['class SmallBlockTriton(nn.Module)', '@triton.jit']) {
        await page.keyboard.press('Control+F');
        const field = page.locator('.find-widget textarea, .find-widget input').first();
        await field.fill(needle);
        seen.find[needle] = await waitFor(`Ctrl+F "${needle}"`, 10_000, async () => {
            const count = await page.locator('.find-widget .matchesCount').innerText();
            return /\d+ of \d+/.test(count) && count;
        });
        await page.keyboard.press('Escape');
    }
    await page.keyboard.press('Control+S');
    await waitFor('small_block_triton.py saved', 15_000, async () =>
        !(await output.getAttribute('class')).includes('dirty'));

    // the server dies: the extension says so and starts it again
    const rootPid = Number(process.env.DRTRITON_SERVER_PID || '0');
    if (rootPid) {
        const pids = serverProcesses(rootPid);
        say('killing the language server:', pids.join(' '));
        if (pids.length !== 1) {
            throw new Error(`expected one language server process under ${rootPid}, found ${pids.length}`);
        }
        const workers = processesBelow(pids[0], () => true); // the verifier's, left without their server
        process.kill(pids[0], 'SIGKILL');
        seen.crashMessage = await waitFor('the restart message', 30_000, async () =>
            (await notifications()).find((n) => n.includes('language server stopped')));
        seen.restartedPids = await waitFor('a new language server process', 60_000, async () => {
            const now = serverProcesses(rootPid).filter((p) => p !== pids[0]);
            return now.length > 0 && now;
        }, 250);
        seen.statusRestarted = await waitFor('the status bar to show the server running again', 60_000, async () => {
            const label = await statusLabel(page);
            return label.includes('server running') && label;
        }, 250);
        await shot(page, '06-restarted');
        // they should end on their own once their server is gone; whatever does not is ended here
        await waitFor('the old server\'s workers to exit', 10_000, async () => !workers.some(alive), 250)
            .catch(() => undefined);
        seen.orphanedWorkers = workers.filter(alive);
        seen.orphanedWorkers.forEach((pid) => process.kill(pid, 'SIGKILL'));
    }

    // the user points the extension at an interpreter that cannot run the server: an error
    // names the cause, and "Show Output" shows drtriton doctor's report of that interpreter
    const broken = process.env.DRTRITON_BROKEN_PYTHON;
    if (broken) {
        const file = path.join(workspace, '.vscode', 'settings.json');
        const settings = JSON.parse(fs.readFileSync(file, 'utf8'));
        fs.writeFileSync(file, JSON.stringify({ ...settings, 'drtriton.pythonPath': broken }, null, 2));
        say('drtriton.pythonPath set to', broken);
        seen.brokenPythonMessage = await waitFor('the error for an interpreter that cannot run the server', 60_000,
            async () => (await notifications()).find((n) => n.includes('cannot run the language server')));
        const toast = page.locator('.notification-toast', { hasText: 'cannot run the language server' }).first();
        await toast.locator('.monaco-button', { hasText: 'Show Output' }).first().click();
        const output = page.locator('.part.panel .monaco-editor').first();
        seen.brokenPythonOutput = await waitFor('drtriton doctor\'s report in the DRTriton output', 60_000, async () => {
            const lines = await visibleLines(output);
            return lines.some((l) => l.startsWith('server (editors)')) && lines;
        }, 500);
        await shot(page, '07-broken-python');
    }
}

(async () => {
    fs.mkdirSync(artifacts, { recursive: true });
    const browser = await chromium.launch({
        executablePath: process.env.DRTRITON_CHROMIUM || '/usr/bin/chromium',
        headless: true,
        args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
            '--disable-sync', '--no-first-run'],
    });
    const page = await browser.newPage({ viewport: { width: 1400, height: 860 } });
    const stopWatching = watchToasts(page);
    let failed;
    try {
        await run(page);
        say('PASS');
    } catch (e) {
        failed = e;
        say('FAIL:', e.stack || e);
        await shot(page, 'failure').catch(() => undefined);
    } finally {
        stopWatching();
        seen.notifications = [...toasts];
        seen.elapsedS = (Date.now() - started) / 1000;
        fs.writeFileSync(path.join(artifacts, 'observations.json'), JSON.stringify(seen, null, 2));
        await browser.close();
    }
    process.exit(failed ? 1 : 0);
})();
