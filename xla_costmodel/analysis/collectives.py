"""Who takes part in a collective (an internal API for the collective models, after XLA's
`collective_ops_utils`): replica groups as written or as an iota (`replica_groups`, `iota_groups`,
`is_iota`), the group mode (`group_mode`), groups and their sizes (`group_count_and_size`,
`participant_counts`), a collective-permute's pairs (`source_target_pairs`), a module's replica and
partition counts (`module_counts`); `CollectiveGroupError` for groups that cannot be read.
"""

from ._collective_groups import CollectiveGroupError as CollectiveGroupError
from ._collective_groups import group_count_and_size as group_count_and_size
from ._collective_groups import group_mode as group_mode
from ._collective_groups import iota_groups as iota_groups
from ._collective_groups import is_iota as is_iota
from ._collective_groups import module_counts as module_counts
from ._collective_groups import participant_counts as participant_counts
from ._collective_groups import replica_groups as replica_groups
from ._collective_groups import source_target_pairs as source_target_pairs
