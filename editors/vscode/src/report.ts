// The full report of a conversion (the server's `drtriton.report`, Markdown) in VS Code's
// Markdown preview, through a read-only virtual document per class.
import * as vscode from 'vscode';

const SCHEME = 'drtriton-report';

export class ReportView implements vscode.Disposable {
    private readonly texts = new Map<string, string>();
    private readonly changed = new vscode.EventEmitter<vscode.Uri>();
    private readonly registration = vscode.workspace.registerTextDocumentContentProvider(SCHEME, {
        onDidChange: this.changed.event,
        provideTextDocumentContent: (uri) => this.texts.get(uri.toString()) ?? '',
    });

    async show(source: string, className: string, markdown: unknown): Promise<void> {
        if (typeof markdown !== 'string') {
            vscode.window.showInformationMessage(`DRTriton: no conversion of ${className} yet.`);
            return;
        }
        // one document per class of each file: showing it again refreshes an open preview
        const uri = vscode.Uri.from({ scheme: SCHEME, path: `/${className} report.md`, query: source });
        this.texts.set(uri.toString(), markdown);
        this.changed.fire(uri);
        try {
            await vscode.commands.executeCommand('markdown.showPreview', uri);
        } catch {
            // no Markdown preview (the built-in extension is disabled): the text itself
            await vscode.window.showTextDocument(await vscode.workspace.openTextDocument(uri), { preview: true });
        }
    }

    dispose(): void {
        this.registration.dispose();
        this.changed.dispose();
    }
}
