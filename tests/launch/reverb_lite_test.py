"""reverb_lite: Reverb's writer in a process that has no TensorFlow, and a
full `reverb.Client` later in the same process."""

import subprocess
import sys
import textwrap

import numpy as np
import reverb

from repertory import testing


def test_writes_without_tensorflow_then_imports_reverb_in_place():
  tables = [reverb.Table.queue('queue', max_size=10)]
  with testing.reverb_server(tables) as client:
    code = textwrap.dedent(f'''
        import sys
        sys.modules['tensorflow'] = None  # Any import of it fails loudly.
        import numpy as np
        from repertory.launch.process import reverb_lite

        client = reverb_lite.connect({client.server_address!r})
        print('CLIENT', type(client).__name__)
        print('CLASS', client.__class__.__name__)  # Imports nothing.
        writer = client.trajectory_writer(num_keep_alive_refs=2)
        for i in range(3):
          writer.append({{'x': np.float32(i)}})
          writer.create_item('queue', 1.0, {{'x': writer.history['x'][-1:]}})
        writer.flush()
        print('TENSORFLOW', sys.modules.get('tensorflow') is not None)

        del sys.modules['tensorflow']  # Now the full client, in place.
        print('SIZE', client.server_info()['queue'].current_size)
        import reverb
        print('IS A CLIENT', isinstance(client, reverb.Client))
        print('SAME ERRORS', reverb.errors.DeadlineExceededError
              is reverb_lite.errors().DeadlineExceededError)
        full = reverb_lite.connect(client.server_address)
        print('FULL', type(full) is reverb.Client)
        for source in (client, full):  # Both write on, TensorFlow loaded.
          with source.trajectory_writer(num_keep_alive_refs=1) as writer:
            writer.append({{'x': np.float32(3)}})
            writer.create_item('queue', 1.0,
                               {{'x': writer.history['x'][-1:]}})
        print('SIZE', full.server_info()['queue'].current_size)
    ''')
    result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                            text=True, timeout=120, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for line in ('CLIENT WriterClient', 'CLASS WriterClient',
                 'TENSORFLOW False', 'SIZE 3', 'IS A CLIENT True',
                 'SAME ERRORS True', 'FULL True', 'SIZE 5'):
      assert line in result.stdout, output
    items = testing.read_queue(client, 'queue')
    assert [float(np.squeeze(item[0])) for item in items] == [0, 1, 2, 3, 3]


def test_where_reverb_is_imported_connect_is_a_reverb_client():
  from repertory.launch.process import reverb_lite  # pylint: disable=g-import-not-at-top
  with testing.reverb_server([reverb.Table.queue('q', 1)]) as client:
    assert isinstance(reverb_lite.connect(client.server_address),
                      reverb.Client)


def test_a_writer_client_is_a_reverb_client_where_reverb_is_imported():
  # What a ReverbNode's handle is in local_mp: Launchpad's type, as seen
  # by the caller that names it.
  from repertory.launch.process import reverb_lite  # pylint: disable=g-import-not-at-top
  with testing.reverb_server([reverb.Table.queue('q', 1)]) as client:
    writer_client = reverb_lite.WriterClient(client.server_address)
    assert type(writer_client) is reverb_lite.WriterClient  # pylint: disable=unidiomatic-typecheck
    assert isinstance(writer_client, reverb.Client)
    assert writer_client.server_info()['q'].max_size == 1
