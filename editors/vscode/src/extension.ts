// The DRTriton extension: starts the language server (`<python> -m drtriton.server`) and adds
// what LSP alone does not give: commands from the cursor, a status-bar item, the report as a
// Markdown preview, and restarts when the server dies. Code actions, diagnostics, code lenses,
// hovers, progress and the streamed output file all come from the server.
import * as cp from 'child_process';
import * as vscode from 'vscode';
import {
    CloseAction, CloseHandlerResult, ErrorAction, ExecuteCommandRequest, LanguageClient, State,
} from 'vscode-languageclient/node';
import { onInterpreterChange, resolvePython } from './python';
import { ReportView } from './report';
import { Conversion, StatusItem } from './status';

const CONVERT = 'drtriton.convert'; // the server's commands (server/server.py)
const CANCEL = 'drtriton.cancel';
const REPORT = 'drtriton.report';
const CONVERSION_NOTIFICATION = '$/drtriton/conversion';
const RESTARTS = { max: 5, withinMs: 3 * 60_000 }; // beyond this a crashing server stays stopped

let client: LanguageClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
    const log = vscode.window.createOutputChannel('DRTriton', { log: true });
    const status = new StatusItem();
    const reports = new ReportView();
    context.subscriptions.push(log, status, reports);

    const crashes: number[] = [];
    const start = async (): Promise<void> => {
        status.setServer('starting');
        const python = await resolvePython(log);
        const problem = await checkServer(python.path);
        if (problem) {
            status.setServer('stopped');
            log.error(`cannot start the server with ${python.path} (${python.from}): ${problem}`);
            logDoctor(python.path, log);
            const choice = await vscode.window.showErrorMessage(
                `DRTriton: ${python.path} (${python.from}) cannot run the language server: ${problem}. ` +
                'Install it there (pip install "drtriton[server]") or set drtriton.pythonPath.',
                'Open Settings', 'Show Output');
            if (choice === 'Open Settings') {
                vscode.commands.executeCommand('workbench.action.openSettings', 'drtriton.pythonPath');
            } else if (choice === 'Show Output') {
                log.show();
            }
            return;
        }
        log.info(`starting ${python.path} -m drtriton.server (${python.from})`);
        client = new LanguageClient('drtriton', 'DRTriton', {
            command: python.path,
            args: ['-m', 'drtriton.server'],
        }, {
            documentSelector: [{ scheme: 'file', language: 'python' }],
            // answers the server's workspace/configuration for `drtriton` and tells it of changes
            synchronize: { configurationSection: 'drtriton' },
            outputChannel: log,
            errorHandler: {
                error: (_error, _message, count) => ({ action: (count ?? 0) <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown }),
                closed: () => restartOrNot(crashes, log, status),
            },
            middleware: {
                // the server's commands also run from code lenses (and the palette's Cancel):
                // show what they return there
                executeCommand: async (command, args, next) => {
                    const result = await next(command, args);
                    if (command === REPORT && args.length >= 2) {
                        await reports.show(args[0], args[1], result);
                    } else if (command === CANCEL && args.length === 0) {
                        vscode.window.showInformationMessage(`DRTriton: cancelled ${result?.cancelled ?? 0} conversion(s).`);
                    }
                    return result;
                },
            },
        });
        client.onNotification(CONVERSION_NOTIFICATION, (c: Conversion) => status.update(c));
        client.onDidChangeState((e) => status.setServer(e.newState === State.Running ? 'running' :
            e.newState === State.Starting ? 'starting' : 'stopped'));
        try {
            await client.start();
        } catch (e) { // the process exited during the handshake; its stderr is in the output channel
            status.setServer('stopped');
            log.error(`the language server did not start: ${e}`);
            logDoctor(python.path, log);
            vscode.window.showErrorMessage('DRTriton: the language server did not start (see the DRTriton output).',
                'Show Output').then((choice) => choice && log.show());
        }
    };
    const restart = async (): Promise<void> => {
        const old = client;
        client = undefined;
        await old?.dispose().catch((e) => log.warn(`stopping the server: ${e}`));
        crashes.length = 0;
        await start();
    };

    context.subscriptions.push(
        vscode.commands.registerCommand('drtriton.convertClass', async () => {
            const target = await classAtCursor('convert');
            if (target) {
                const reply = await serverCommand(CONVERT, target.uri, target.className);
                if (reply?.error) {
                    log.warn(`convert ${target.className}: ${reply.error}`); // the server showed it
                }
            }
        }),
        vscode.commands.registerCommand('drtriton.showReport', async (uri?: string, className?: string) => {
            const target = uri && className ? { uri, className } : await classAtCursor('report on');
            if (target) {
                await reports.show(target.uri, target.className, await serverCommand(REPORT, target.uri, target.className));
            }
        }),
        vscode.commands.registerCommand('drtriton.restartServer', restart),
        vscode.commands.registerCommand('drtriton.showOutput', () => log.show()),
        vscode.workspace.onDidChangeConfiguration((e) => {
            if (e.affectsConfiguration('drtriton.pythonPath')) {
                restart();
            }
        }),
    ); // the client itself is stopped by deactivate()
    const interpreterChanged = await onInterpreterChange(log, () => {
        if (!vscode.workspace.getConfiguration('drtriton').get<string>('pythonPath')) {
            restart();
        }
    });
    if (interpreterChanged) {
        context.subscriptions.push(interpreterChanged);
    }
    await start();
}

export async function deactivate(): Promise<void> {
    await client?.dispose();
}

// The client's answer to the server process ending: restart it with a message, unless it keeps
// crashing.
async function restartOrNot(crashes: number[], log: vscode.LogOutputChannel, status: StatusItem): Promise<CloseHandlerResult> {
    const now = Date.now();
    crashes.push(now);
    while (crashes.length && now - crashes[0] > RESTARTS.withinMs) {
        crashes.shift();
    }
    const giveUp = crashes.length >= RESTARTS.max;
    const text = giveUp
        ? `DRTriton: the language server stopped ${crashes.length} times in 3 minutes; it stays stopped. ` +
          'See the output, then run "DRTriton: Restart Language Server".'
        : 'DRTriton: the language server stopped unexpectedly; restarting it.';
    log.error(text);
    status.setServer(giveUp ? 'stopped' : 'starting');
    vscode.window.showWarningMessage(text, 'Show Output').then((choice) => choice && log.show());
    return { action: giveUp ? CloseAction.DoNotRestart : CloseAction.Restart, handled: true };
}

// `python -m drtriton.cli doctor` into the output (versions, the device, the optional parts
// missing), for a server that cannot start.
function logDoctor(python: string, log: vscode.LogOutputChannel): void {
    cp.execFile(python, ['-m', 'drtriton.cli', 'doctor'], { timeout: 60_000 }, (error, stdout, stderr) => {
        const report = stdout.trim();
        if (report) {
            log.info(`drtriton doctor:\n${report}`);
        } else {
            log.warn(`drtriton doctor did not run: ${stderr.trim().split('\n').pop() || error?.message}`);
        }
    });
}

// `python -c "import drtriton.server.server"` (the module that imports pygls and lsprotocol): a
// clear message instead of a server dying at start-up.
function checkServer(python: string): Promise<string | undefined> {
    return new Promise((resolve) => {
        cp.execFile(python, ['-c', 'import drtriton.server.server'], { timeout: 60_000 }, (error, _stdout, stderr) => {
            if (!error) {
                resolve(undefined);
            } else if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
                resolve('no such program');
            } else {
                const lines = stderr.trim().split('\n');
                resolve(lines[lines.length - 1] || error.message);
            }
        });
    });
}

async function serverCommand(command: string, ...args: unknown[]): Promise<any> {
    if (!client?.isRunning()) {
        vscode.window.showErrorMessage('DRTriton: the language server is not running (see the DRTriton output).');
        return undefined;
    }
    return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
}

// The module class under the cursor, as the server sees it: its "Convert <Class> to Triton" code
// actions name the classes in the selection, so the extension does not parse Python itself.
async function classAtCursor(what: string): Promise<{ uri: string; className: string } | undefined> {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.languageId !== 'python') {
        vscode.window.showInformationMessage(`DRTriton: open a Python file to ${what} a module.`);
        return undefined;
    }
    const actions = await vscode.commands.executeCommand<(vscode.CodeAction | vscode.Command)[]>(
        'vscode.executeCodeActionProvider', editor.document.uri, editor.selection,
        vscode.CodeActionKind.RefactorRewrite.value) ?? [];
    const classes = actions
        .map((a) => (typeof a.command === 'string' ? a as vscode.Command : (a as vscode.CodeAction).command))
        .filter((c): c is vscode.Command => c?.command === CONVERT && Array.isArray(c.arguments))
        .map((c) => ({ uri: String(c.arguments![0]), className: String(c.arguments![1]) }));
    if (classes.length === 0) {
        vscode.window.showInformationMessage(`DRTriton: put the cursor in an nn.Module subclass to ${what} it.`);
        return undefined;
    }
    if (classes.length === 1) {
        return classes[0];
    }
    const picked = await vscode.window.showQuickPick(classes.map((c) => c.className), { placeHolder: `Class to ${what}` });
    return classes.find((c) => c.className === picked);
}
